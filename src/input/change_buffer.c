/*-------------------------------------------------------------------------
 *
 * change_buffer.c
 *	  The changes a read of a change stream decoded, kept until decoding
 *	  is over (see change_buffer.h).
 *
 * A record is a header (table, kind, what the row knows of its origin,
 * the image's length) and the row's tuple header and data as decoding
 * gave them (a heap tuple: the sinks mostly want one -- a changelog's data
 * column is a composite datum made of it), both MAXALIGNed so that a
 * record in memory is read in place.  Records go into chunks of
 * memory until mem_limit; the first record past it sends everything to a
 * temporary file (BufFile, as tuplestore spills), where every later one
 * goes too.  Reading is sequential, once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/tablespace.h"
#include "storage/buffile.h"
#include "utils/memutils.h"

#include "input/change_buffer.h"

#define CHUNK_SIZE (64 * 1024)

typedef struct ChangeHeader
{
	uint32		len;			/* of the tuple after it; 0: a row of NULLs */
	int16		table;
	int16		kind;
	bool		partial;
	bool		incomplete;
	XLogRecPtr	lsn;
	TimestampTz commit_time;
	TransactionId xid;
	XLogRecPtr	final_lsn;
} ChangeHeader;

#define HEADER_SIZE MAXALIGN(sizeof(ChangeHeader))

typedef struct Chunk
{
	struct Chunk *next;
	Size		used;
	Size		size;
	char		data[FLEXIBLE_ARRAY_MEMBER];	/* MAXALIGNed by palloc */
} Chunk;

#define CHUNK_DATA_OFFSET MAXALIGN(offsetof(Chunk, data))

struct ChangeBuffer
{
	MemoryContext parent;		/* where the buffer and its file live */
	MemoryContext cxt;			/* its chunks; reset when they go to the file */
	ResourceOwner owner;		/* of the temporary file */
	Size		mem_limit;
	Size		mem_used;
	uint64		count;

	/* in memory: chunks in order */
	Chunk	   *first;
	Chunk	   *last;

	/* past mem_limit: everything in a file */
	BufFile    *file;

	/* a record on its way to or from the file */
	char	   *buf;
	Size		buf_size;

	/* reading */
	bool		reading;
	Chunk	   *read_chunk;
	Size		read_off;
};

static inline char *
chunk_data(Chunk *c)
{
	return (char *) c + CHUNK_DATA_OFFSET;
}

ChangeBuffer *
change_buffer_create(Size mem_limit, ResourceOwner owner)
{
	ChangeBuffer *b = palloc0(sizeof(ChangeBuffer));

	b->parent = CurrentMemoryContext;
	b->cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf change buffer",
								   ALLOCSET_DEFAULT_SIZES);
	/* its catalog lookups (temp_tablespaces) now, not under decoding's snapshot */
	PrepareTempTablespaces();
	b->owner = owner;
	b->mem_limit = Max(mem_limit, CHUNK_SIZE);
	return b;
}

/*
 * Everything in memory to a new file, and the memory freed.  This runs in
 * a decoding callback: the file belongs to the call (its resource owner
 * and memory), not to decoding's subtransaction and per-change memory.
 */
static void
spill(ChangeBuffer *b)
{
	ResourceOwner saved_owner = CurrentResourceOwner;
	MemoryContext saved_cxt = MemoryContextSwitchTo(b->parent);
	Chunk	   *c;

	CurrentResourceOwner = b->owner;
	PG_TRY();
	{
		b->file = BufFileCreateTemp(false);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved_owner;
		MemoryContextSwitchTo(saved_cxt);
	}
	PG_END_TRY();
	for (c = b->first; c != NULL; c = c->next)
		BufFileWrite(b->file, chunk_data(c), c->used);
	MemoryContextReset(b->cxt);
	b->first = b->last = NULL;
	b->mem_used = 0;
	/* it was in the memory just reset (a spill of an earlier round) */
	b->buf = NULL;
	b->buf_size = 0;
}

/* A record's room, to be written to the file (buf grows as needed). */
static char *
write_space(ChangeBuffer *b, Size size)
{
	if (b->buf_size < size)
	{
		Size		want = Max(size, 2 * b->buf_size);

		if (b->buf != NULL)
			pfree(b->buf);
		b->buf = MemoryContextAllocZero(b->cxt, want);
		b->buf_size = want;
	}
	return b->buf;
}

/* Room for size bytes at the end of the last chunk. */
static char *
reserve(ChangeBuffer *b, Size size)
{
	Chunk	   *c = b->last;
	char	   *p;

	/* a chunk of an earlier round, emptied by change_buffer_reset */
	if (c != NULL && c->size - c->used < size && c->next != NULL && c->next->size >= size)
	{
		c = b->last = c->next;
		Assert(c->used == 0);
		b->mem_used += CHUNK_DATA_OFFSET + c->size;
	}
	if (c == NULL || c->size - c->used < size)
	{
		Size		csize = Max(CHUNK_SIZE, size);

		c = MemoryContextAlloc(b->cxt, CHUNK_DATA_OFFSET + csize);
		c->used = 0;
		c->size = csize;
		if (b->last != NULL)
		{
			c->next = b->last->next;
			b->last->next = c;
		}
		else
		{
			c->next = b->first;
			b->first = c;
		}
		b->last = c;
		b->mem_used += CHUNK_DATA_OFFSET + csize;
	}
	p = chunk_data(c) + c->used;
	c->used += size;
	return p;
}

void
change_buffer_put(ChangeBuffer *b, int table, RowKind kind, const PtfRowMeta *meta,
				  HeapTuple row)
{
	uint32		len = row != NULL ? row->t_len : 0;
	Size		size = HEADER_SIZE + MAXALIGN(len);
	ChangeHeader *h;
	char	   *p;

	Assert(!b->reading);
	if (b->file == NULL && b->mem_used + size > b->mem_limit && b->first != NULL)
		spill(b);
	p = b->file != NULL ? write_space(b, size) : reserve(b, size);
	h = (ChangeHeader *) p;
	h->len = len;
	h->table = (int16) table;
	h->kind = (int16) kind;
	h->partial = meta->partial;
	h->incomplete = meta->incomplete;
	h->lsn = meta->lsn;
	h->commit_time = meta->commit_time;
	h->xid = meta->xid;
	h->final_lsn = meta->final_lsn;
	if (len > 0)
		memcpy(p + HEADER_SIZE, row->t_data, len);
	if (b->file != NULL)
		BufFileWrite(b->file, p, size);
	b->count++;
}

uint64
change_buffer_count(ChangeBuffer *b)
{
	return b->count;
}

bool
change_buffer_spilled(ChangeBuffer *b)
{
	return b->file != NULL;
}

static void
short_read(void)
{
	ereport(ERROR,
			(errcode_for_file_access(),
			 errmsg("could not read the changes buffered in a temporary file")));
}

static void
read_exactly(ChangeBuffer *b, void *p, Size size)
{
	if (size > 0 && BufFileRead(b->file, p, size) != size)
		short_read();
}

/* The next record's header and image (its tuple header), or NULL at the end. */
static ChangeHeader *
next_record(ChangeBuffer *b, HeapTupleHeader *image)
{
	ChangeHeader *h;

	if (b->file != NULL)
	{
		ChangeHeader hdr;
		size_t		got = BufFileRead(b->file, &hdr, sizeof(hdr));

		if (got == 0)
			return NULL;
		if (got != sizeof(hdr))
			short_read();
		h = (ChangeHeader *) write_space(b, HEADER_SIZE + MAXALIGN(hdr.len));
		*h = hdr;
		read_exactly(b, (char *) h + sizeof(hdr), HEADER_SIZE - sizeof(hdr) + MAXALIGN(hdr.len));
		*image = hdr.len > 0 ? (HeapTupleHeader) ((char *) h + HEADER_SIZE) : NULL;
		return h;
	}

	while (b->read_chunk != NULL && b->read_off >= b->read_chunk->used)
	{
		b->read_chunk = b->read_chunk->next;
		b->read_off = 0;
	}
	if (b->read_chunk == NULL)
		return NULL;
	h = (ChangeHeader *) (chunk_data(b->read_chunk) + b->read_off);
	*image = h->len > 0 ? (HeapTupleHeader) ((char *) h + HEADER_SIZE) : NULL;
	b->read_off += HEADER_SIZE + MAXALIGN(h->len);
	return h;
}

bool
change_buffer_next(ChangeBuffer *b, TupleTableSlot **slots, HeapTupleData *tuples,
				   int *table, RowKind *kind, PtfRowMeta *meta)
{
	ChangeHeader *h;
	HeapTupleHeader image;

	if (!b->reading)
	{
		b->reading = true;
		b->read_chunk = b->first;
		b->read_off = 0;
		if (b->file != NULL && BufFileSeek(b->file, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not rewind the temporary file of buffered changes")));
	}
	h = next_record(b, &image);
	if (h == NULL)
		return false;
	*table = h->table;
	*kind = (RowKind) h->kind;
	meta->lsn = h->lsn;
	meta->commit_time = h->commit_time;
	meta->xid = h->xid;
	meta->final_lsn = h->final_lsn;
	meta->partial = h->partial;
	meta->incomplete = h->incomplete;
	if (image != NULL)
	{
		HeapTuple	tuple = &tuples[h->table];

		tuple->t_len = h->len;
		tuple->t_data = image;
		ExecStoreHeapTuple(tuple, slots[h->table], false);
	}
	else
		ExecStoreAllNullTuple(slots[h->table]);
	return true;
}

Size
change_buffer_bytes(ChangeBuffer *b)
{
	return b->mem_used;
}

void
change_buffer_reset(ChangeBuffer *b)
{
	Chunk	   *c;

	if (b->file != NULL)
	{
		BufFileClose(b->file);
		b->file = NULL;
	}
	/* the chunks are used again in order: their pages are the process's already */
	for (c = b->first; c != NULL; c = c->next)
		c->used = 0;
	b->last = b->first;
	b->mem_used = b->first != NULL ? CHUNK_DATA_OFFSET + b->first->size : 0;
	b->reading = false;
	b->read_chunk = NULL;
	b->read_off = 0;
}

void
change_buffer_free(ChangeBuffer *b)
{
	if (b->file != NULL)
		BufFileClose(b->file);
	MemoryContextDelete(b->cxt);
	pfree(b);
}

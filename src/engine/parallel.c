/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  Bounded one-shot calls over a relation, run partly in parallel
 *	  workers, with a final combine in the leader.
 *
 * When.  A call without a uid, change stream or query, whose inputs are
 * plain heap tables (no inheritance children, not temporary), whose
 * function said how it can be split (call->parallel), gets parallel
 * workers by PostgreSQL's own rule for a parallel scan of the split
 * input: max_parallel_workers_per_gather > 0, the table at least
 * min_parallel_table_scan_size, one worker more each time it triples (or
 * its parallel_workers option), not already in parallel mode.  It stays
 * serial when anything the workers would run is not parallel safe (the
 * key types' hash and equality functions and what they call for a key's
 * parts, key_spec_parallel_safe; row-level security quals), or when
 * "SELECT * FROM rel", the serial call's statement, is not planned as a
 * sequential scan (security quals an index answers: the serial order is
 * then not block order).
 *
 * Shares.  The split input is cut into chunks of consecutive blocks;
 * participants (the workers, and the leader) claim chunks one after the
 * other in block order under a spinlock.  Each participant starts the
 * serial call's "SELECT * FROM rel" once, through the executor, and reads
 * a chunk by giving that statement's heap scan the chunk's blocks as its
 * limits (input/sql_input.c, sql_input_ranges_run): every participant
 * checks the table's privileges and applies its row-level security
 * policies exactly as the serial call does (workers run as the leader's
 * user, in its snapshot, with its GUCs): nothing is bypassed, so nothing
 * has to be checked again here.  And a table larger than a quarter of
 * shared_buffers is read through the ring of buffers the serial scan
 * has: a TID range query per chunk (which this file ran before) read
 * every block into a buffer of the pool, evicting other tables' pages,
 * and a worker -- a fresh process -- faulted in every 4 kB page of the
 * buffers it filled, half its CPU (keep-first over 10M rows, 575 MB,
 * 10k keys, from a cold pool: 105k faults and 823 ms of CPU a worker,
 * 932 ms against the serial 798; through the ring 920 faults and 450 ms,
 * 487 ms against 832).  The serial call's arrival order is a sequential
 * scan's, block by block: chunk order, then the order within a chunk, is
 * that order.
 *
 * (A serial scan of a table larger than a quarter of shared_buffers may
 * start where another scan of it is, with synchronize_seqscans: the
 * parallel call's order is block order from the first block, the order of
 * a serial call that scanned alone.)
 *
 * Four ways of splitting (PtfParallelMode):
 *	  - FIRST_ARRIVAL, FIRST_EVENT (keep-first): a worker runs a filter
 *		(operators/dedup_partial.c) over its chunks, passing on the rows
 *		that may be a key's answer, and marks the end of each chunk.  The
 *		leader runs the serial operator and frame over the rows of every
 *		chunk in chunk order: its own chunks read directly, the workers'
 *		as passed on.  That is the serial input less rows that cannot be
 *		answers, in the serial order: the serial answer, with the leader's
 *		state exactly the serial call's (memory per key unchanged), spilling
 *		as it does.  The leader claims a chunk when every earlier one is
 *		combined, and, about to wait for a worker's chunk, the one after it
 *		(else the workers would take every chunk while the leader only
 *		combined): its own rows never wait, and the leader reads one chunk
 *		for each worker's chunk it waits for; workers that get ahead
 *		keep what the leader cannot take yet in a local spool (a
 *		tuplestore: work_mem, then a temporary file), never blocking.
 *	  - SPLIT (the temporal join): every participant runs the whole
 *		operator over the other inputs, read whole, and the chunks it
 *		claimed of the split input; output rows go to the leader, which
 *		emits them.  Right for operators whose output for a row of the
 *		split input depends only on that row and the other inputs.
 *	  - PARTIAL (window_aggregate): every participant runs the operator over
 *		its chunks; a worker's operator, at the end of its input, emits
 *		partial rows (call->partial_desc: a key's slice and its serialized
 *		aggregate states) instead of firing, which the leader's operator
 *		combines as rows of a further input of its frame
 *		(operators/window_partial.c): spilled with their keys when memory
 *		is short, as rows are.
 *	  - BY_KEY (window_aggregate when partial results would not pay:
 *		fewer than ten rows a slice, or a session, per participant): the
 *		keys are cut into shares by their hash (its high bits; the keyed
 *		state indexes by the low ones), one share a worker, and one for
 *		the leader when the workers planned leave it a CPU; each
 *		reads the whole input and runs the whole operator over the rows of
 *		its share's keys; workers' output rows go to the leader, which
 *		emits them (and takes them while it reads its share).  A
 *		key's rows come in the serial order (a scan of every block from
 *		the first, never a synchronized one), so its windows are
 *		the serial call's.  Every participant pays for reading the whole
 *		table, none for partial results: it pays when a row costs the
 *		operator much more than reading it does (HOP over 10k keys x 96
 *		slices, 5M rows: 0.57-0.66x the serial call; 10M rows, one worker
 *		and the leader: 0.56-0.72x, where the worker alone with every key,
 *		parallel_leader_participation off, took 0.88-1.26x).  Not
 *		keep-first, whose rows cost about what reading
 *		them does (5M rows, 500k keys: 1.05-1.25x).  The shares are the
 *		chunks claimed; a participant that finds one left over (fewer
 *		workers than planned) reads the table again for it; when no worker
 *		started, the leader reads every share at once.  Each
 *		participant's state has the serial call's memory limit.

 * Rows travel in batches (a message of up to PAR_BATCH_BYTES of
 * MinimalTuples), which the leader reads in place.  The input is read in
 * a snapshot taken as the serial call's SPI statement takes it (a new
 * command, a fresh snapshot), which the workers share.  DEBUG1 says what
 * each participant read, passed on and spent.
 *
 * Workers are started with CreateParallelContext, our library's
 * ptf_parallel_main as entry point: it calls the same SQL function with
 * the leader's arguments (serialized with datumSerialize, their types in
 * a FuncExpr of constants), so every argument is checked as in the
 * leader, and ptf_call_run hands the call to ptf_parallel_worker_run.
 * Rows travel in one shm_mq per worker.  A worker's error reaches the
 * leader through the parallel context's error queue and is raised there;
 * a cancel or an error in the leader ends the workers with the
 * transaction.  Fewer workers than planned (none included) just leave
 * more chunks to the others and the leader.  With
 * parallel_leader_participation off the leader only combines, as under a
 * Gather (unless no worker started).  When SPLIT, PARTIAL or BY_KEY, so it
 * does when every CPU this process may run on already has a worker: reading
 * chunks too, the leader would only share the workers' CPUs while the
 * combining, firing and emitting that only it does wait
 * (window_aggregate TUMBLE, 2 workers on 2 CPUs, alternating builds: 5M
 * rows 2416-2673 ms -> 2128-2469 ms, 2M rows 1288-1548 -> 1117-1428 ms).
 * A PARTIAL call is planned one worker fewer than the CPUs instead
 * (call_workers), so that its leader reads too: the leader's own partial
 * states are merged by no one, where a worker's are passed on and merged
 * after the scan, and that merge was the call's tail.
 * Keep-first's leader still reads: its own chunks are the ones that need
 * no passing on (over 50 rows a key, 3-15% slower with the leader only
 * combining).
 *
 * Flow.  The leader of a SPLIT, PARTIAL or BY_KEY call takes the workers'
 * messages as they come, from whichever worker has one (drain), and between every
 * PAR_DRAIN_ROWS rows of any input it reads itself: there a worker whose
 * queue is full waits for the leader.  Keep-first's leader takes a
 * worker's messages only when it combines that worker's chunk: there a
 * worker spools what its queue cannot take, so that it never waits while
 * it has rows to read, and flushes each message, whose chunk's end the
 * leader may be waiting for (outbox_put).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "access/parallel.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "engine/parallel.h"
#include "operators/dedup_partial.h"

#define PAR_KEY_SHARED		UINT64CONST(0x5054460000000001)
#define PAR_KEY_CALL		UINT64CONST(0x5054460000000002)
#define PAR_KEY_QUEUES		UINT64CONST(0x5054460000000003)

/*
 * per worker: the only buffer of a blocking outbox (SPLIT, PARTIAL, BY_KEY); a
 * keep-first worker ahead of the leader spools behind it
 */
#define PAR_QUEUE_SIZE		(1024 * 1024)

/* chunks per participant, for balance; and bounds of a chunk, in blocks */
#define PAR_CHUNKS_PER_PARTICIPANT 32
#define PAR_MIN_CHUNK_BLOCKS 16
#define PAR_MAX_CHUNK_BLOCKS 8192

/* BY_KEY: shares of the keys, one a worker, in a mask */
#define PAR_MAX_KEY_SHARES	64

#define PAR_OWNER_NONE		(-2)
#define PAR_OWNER_LEADER	(-1)

typedef struct ParShared
{
	Oid			fn_oid;
	Oid			fn_collation;
	PtfParallelMode mode;
	int			split_input;
	BlockNumber chunk_blocks;
	int			nchunks;
	slock_t		mutex;
	int			next_chunk;		/* the next to claim */
	int			owner[FLEXIBLE_ARRAY_MEMBER];	/* per chunk: a worker number, or the leader */
} ParShared;

/*
 * What comes before every message's payload.  Rows travel in batches of
 * up to PAR_BATCH_BYTES: each a MinimalTuple at a MAXALIGNed offset (its
 * t_len says how long), so that a queue and a spool work per batch, and
 * a row costs a copy on each side.
 */
typedef struct ParMsg
{
	char		tag;
	int32		chunk;			/* 'E' */
	int32		nrows;			/* 'R', 'O' */
} ParMsg;

#define PAR_BATCH_BYTES		(64 * 1024)

#define PAR_MSG_HEADER	MAXALIGN(sizeof(ParMsg))

#define PAR_MSG_ROW		'R'		/* rows for the leader's frame (input 0) */
#define PAR_MSG_OUTPUT	'O'		/* output rows of the call */
#define PAR_MSG_PARTIAL	'P'		/* partial rows for the leader's operator */
#define PAR_MSG_END		'E'		/* the end of a chunk */
#define PAR_MSG_STATS	'S'		/* the worker is done: what it did */

typedef struct ParWorkerStats
{
	uint64		rows_read;		/* of the split input */
	uint64		other_rows;		/* of the inputs read whole */
	uint64		rows_passed;
	int			chunks;
	int64		cpu_us;			/* user and system time (DEBUG1) */
	int64		minflt;
	int			pid;
	PtfFrameStats state;		/* its frame's at the end (BY_KEY sums them) */
} ParWorkerStats;

/* this process's CPU time so far, in microseconds */
static int64
cpu_time_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (int64) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- reading one chunk ---- */

typedef struct ChunkScan
{
	PtfSqlInput sql;			/* "SELECT * FROM rel", read by ranges */
	ParShared  *shared;
	MemoryContext cxt;			/* where the scan is started: the participant's run */
} ChunkScan;

/*
 * How a participant reads chunks: the relation's own statement, its
 * sequential scan given each chunk's blocks (sql_input_ranges_run), so
 * that a large table is read through a ring of buffers, as the serial
 * call's scan reads it.  The leader asks first whether the statement is
 * planned as a sequential scan (sql_input_reads_by_ranges; not when
 * row-level security quals an index answers: the serial call's order is
 * then not block order, and the call stays serial); a worker's first
 * chunk finds out again, and fails with 55000 if the plan changed since.
 */
static void
chunk_scan_prepare(ChunkScan *cs, const PtfCallInput *in, ParShared *shared)
{
	memset(cs, 0, sizeof(*cs));
	cs->shared = shared;
	cs->cxt = CurrentMemoryContext;
	/* the call's own input statement, prepared (and checked parallel safe, call_workers) */
	Assert(in->query == NULL && in->sql.plan != NULL && !in->sql.changelog);
	cs->sql = in->sql;
	cs->sql.ranges = NULL;
}

/* Read blocks [lo, hi) into sink, in the active snapshot (parallel mode: no new command). */
static void
range_scan_run(ChunkScan *cs, BlockNumber lo, BlockNumber hi, PtfRowSink sink, void *arg)
{
	if (cs->sql.ranges == NULL)
	{
		/* the executor's state lives until the end, whatever context reads first */
		MemoryContext old = MemoryContextSwitchTo(cs->cxt);

		sql_input_ranges_begin(&cs->sql);
		MemoryContextSwitchTo(old);
	}
	sql_input_ranges_run(&cs->sql, lo, hi - lo, sink, arg);
}

/* Read chunk c into sink. */
static void
chunk_scan_run(ChunkScan *cs, int c, PtfRowSink sink, void *arg)
{
	ParShared  *shared = cs->shared;
	BlockNumber lo = (BlockNumber) c * shared->chunk_blocks;

	/* the last chunk is open-ended, like a scan that reads to the end */
	BlockNumber hi = (c == shared->nchunks - 1) ? MaxBlockNumber + (BlockNumber) 1 :
		lo + shared->chunk_blocks;

	range_scan_run(cs, lo, hi, sink, arg);
}

/*
 * Read every block (BY_KEY): the whole range, in block order from the
 * first, as a chunk is read.
 */
static void
whole_scan_run(ChunkScan *cs, PtfRowSink sink, void *arg)
{
	range_scan_run(cs, 0, MaxBlockNumber + (BlockNumber) 1, sink, arg);
}

/* Done reading (a started scan ends before the snapshot it reads in goes). */
static void
chunk_scan_end(ChunkScan *cs)
{
	sql_input_ranges_end(&cs->sql);
}

/*
 * Keep-first's modes: the leader combines the workers' rows in chunk
 * order, and a worker spools what its queue cannot take (see "Flow").
 */
static inline bool
mode_ordered(PtfParallelMode mode)
{
	return mode == PTF_PARALLEL_FIRST_ARRIVAL || mode == PTF_PARALLEL_FIRST_EVENT;
}

/* The next chunk for a participant, or -1 when none is left. */
static int
claim_chunk(ParShared *shared, int who)
{
	int			c = -1;

	SpinLockAcquire(&shared->mutex);
	if (shared->next_chunk < shared->nchunks)
	{
		c = shared->next_chunk++;
		shared->owner[c] = who;
	}
	SpinLockRelease(&shared->mutex);
	return c;
}

/*
 * ---- the worker's outbox ----
 *
 * Blocking (SPLIT, PARTIAL, BY_KEY), a full queue means the leader is
 * behind: the worker waits for it, and leaves its CPU to the leader, instead of
 * copying its rows into a spool and out again (a temporal join's worker,
 * 2.5M probes on two CPUs, spooled most of what it sent: 46k page faults
 * against 8k waiting).  Otherwise (keep-first) it spools: see "Flow" in
 * the header.
 */

typedef struct Outbox
{
	shm_mq_handle *mqh;
	MemoryContext cxt;			/* the worker's: rows come in short-lived contexts */
	bool		blocking;		/* wait for a full queue, never spool */
	bool		detached;		/* the leader is gone: nothing more to say */
	StringInfoData pending;		/* a message the queue took part of, or none */
	bool		has_pending;
	Tuplestorestate *spool;		/* messages behind it */
	TupleDesc	spooldesc;
	TupleTableSlot *spoolslot;
	uint64		spooled;		/* in the spool, not yet sent */
} Outbox;

static bool
outbox_try(Outbox *ob, const char *data, Size len, bool nowait)
{
	shm_mq_iovec iov;
	shm_mq_result res;

	iov.data = data;
	iov.len = len;
	/* spooled: keep-first's, which the leader waits for (outbox_put) */
	res = shm_mq_sendv(ob->mqh, &iov, 1, nowait, true);
	if (res == SHM_MQ_DETACHED)
	{
		ob->detached = true;
		return true;
	}
	return res == SHM_MQ_SUCCESS;
}

/* Send what waits, as far as the queue takes it (all of it unless nowait). */
static void
outbox_pump(Outbox *ob, bool nowait)
{
	for (;;)
	{
		if (ob->detached)
			return;
		if (ob->has_pending)
		{
			if (!outbox_try(ob, ob->pending.data, ob->pending.len, nowait))
				return;
			ob->has_pending = false;
		}
		if (ob->spooled == 0)
			return;
		{
			/* read in the worker's context: a tuple read from disk is the slot's to free */
			MemoryContext old = MemoryContextSwitchTo(ob->cxt);
			bool		isnull;
			bytea	   *b;

			if (!tuplestore_gettupleslot(ob->spool, true, false, ob->spoolslot))
				elog(ERROR, "parallel worker's spool ended early");
			b = DatumGetByteaPP(slot_getattr(ob->spoolslot, 1, &isnull));
			resetStringInfo(&ob->pending);
			appendBinaryStringInfo(&ob->pending, VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
			ExecClearTuple(ob->spoolslot);
			MemoryContextSwitchTo(old);
			ob->has_pending = true;
			ob->spooled--;
		}
	}
}

static void
outbox_spool(Outbox *ob, const char *header, Size hlen, const char *data, Size len)
{
	bytea	   *b = palloc(VARHDRSZ + hlen + len);
	Datum		d = PointerGetDatum(b);
	bool		isnull = false;

	SET_VARSIZE(b, VARHDRSZ + hlen + len);
	memcpy(VARDATA(b), header, hlen);
	if (len > 0)
		memcpy(VARDATA(b) + hlen, data, len);
	if (ob->spool == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ob->cxt);

		ob->spooldesc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(ob->spooldesc, 1, NULL, BYTEAOID, -1, 0);
		ob->spoolslot = MakeSingleTupleTableSlot(ob->spooldesc, &TTSOpsMinimalTuple);
		ob->spool = tuplestore_begin_heap(false, false, work_mem);
		MemoryContextSwitchTo(old);
	}
	tuplestore_putvalues(ob->spool, ob->spooldesc, &d, &isnull);
	ob->spooled++;
	pfree(b);
}

/* One message: sent now if the queue takes it whole, else kept in order. */
static void
outbox_put(Outbox *ob, char tag, int32 chunk, int32 nrows, const char *data, Size len)
{
	union
	{
		ParMsg		msg;
		char		bytes[PAR_MSG_HEADER];
	}			header;

	if (ob->detached)
		return;
	memset(&header, 0, sizeof(header));
	header.msg.tag = tag;
	header.msg.chunk = chunk;
	header.msg.nrows = nrows;
	if (!ob->has_pending && ob->spooled == 0)
	{
		shm_mq_iovec iov[2];
		shm_mq_result res;

		iov[0].data = header.bytes;
		iov[0].len = PAR_MSG_HEADER;
		iov[1].data = data;
		iov[1].len = len;
		/*
		 * Flushed at once unless blocking: shm_mq tells the receiver of
		 * what was sent only once a quarter of the queue is written, or
		 * when told to flush, and keep-first's leader waits for each
		 * chunk's end.  Unflushed, a chunk's end -- a few bytes, after the
		 * few rows a chunk passes on -- reached the leader 256 kB of
		 * messages later: a worker read every chunk while the leader,
		 * waiting, read none (one worker, 10M rows, 10k keys: the leader
		 * read 2 of 65 chunks, the call as slow as the serial one).
		 */
		res = shm_mq_sendv(ob->mqh, iov, len > 0 ? 2 : 1, !ob->blocking, !ob->blocking);
		Assert(!ob->blocking || res != SHM_MQ_WOULD_BLOCK);
		if (res == SHM_MQ_SUCCESS)
			return;
		if (res == SHM_MQ_DETACHED)
		{
			ob->detached = true;
			return;
		}
		/* the queue took part of it: the rest must follow before anything else */
		resetStringInfo(&ob->pending);
		appendBinaryStringInfo(&ob->pending, header.bytes, PAR_MSG_HEADER);
		appendBinaryStringInfo(&ob->pending, data, len);
		ob->has_pending = true;
		return;
	}
	outbox_spool(ob, header.bytes, PAR_MSG_HEADER, data, len);
	outbox_pump(ob, true);
}

/* ---- the worker ---- */

typedef struct ParWorker
{
	ParShared  *shared;
	Outbox		outbox;
	StringInfoData batch;		/* rows not yet sent */
	char		batch_tag;
	int32		batch_rows;
	PtfCall    *call;
	ParWorkerStats stats;
} ParWorker;

static ParWorker *par_worker = NULL;

bool
ptf_parallel_in_worker(void)
{
	return par_worker != NULL;
}

PtfParallelMode
ptf_parallel_leader_mode(void)
{
	Assert(par_worker != NULL);
	return par_worker->shared->mode;
}

/* The rows batched so far, as one message. */
static void
batch_flush(ParWorker *w)
{
	if (w->batch_rows == 0)
		return;
	outbox_put(&w->outbox, w->batch_tag, 0, w->batch_rows, w->batch.data, w->batch.len);
	resetStringInfo(&w->batch);
	w->batch_rows = 0;
}

/* A row into the batch, as a MinimalTuple (copied once, straight from the slot's tuple). */
static void
send_slot(ParWorker *w, char tag, TupleTableSlot *row)
{
	bool		should_free;
	HeapTuple	ht = ExecFetchSlotHeapTuple(row, false, &should_free);
	uint32		len = ht->t_len - MINIMAL_TUPLE_OFFSET;
	MinimalTuple mt;

	if (w->batch_rows > 0 && (w->batch_tag != tag || w->batch.len + len > PAR_BATCH_BYTES))
		batch_flush(w);
	w->batch_tag = tag;
	enlargeStringInfo(&w->batch, MAXALIGN(len));
	mt = (MinimalTuple) (w->batch.data + w->batch.len);
	memcpy(mt, (char *) ht->t_data + MINIMAL_TUPLE_OFFSET, len);
	mt->t_len = len;

	/*
	 * The leader sees the row as a heap tuple in place (batch_rows), whose
	 * t_ctid these bytes are.  A row heap_form_tuple made (an operator's
	 * own) carries there the mark this PostgreSQL gives a composite datum,
	 * and ExecStoreHeapTuple would check the datum's type -- our t_len --
	 * against the slot's: nothing there.
	 */
	memset(mt->mt_padding, 0, sizeof(mt->mt_padding));
	w->batch.len += MAXALIGN(len);
	w->batch_rows++;
	if (should_free)
		heap_freetuple(ht);
}

/* the partial operator's emit: a row the leader must see */
static void
worker_pass_row(void *arg, RowKind kind, TupleTableSlot *row)
{
	ParWorker  *w = (ParWorker *) arg;

	Assert(kind == ROWKIND_INSERT);
	w->stats.rows_passed++;
	send_slot(w, PAR_MSG_ROW, row);
}

/* the call's emit in SPLIT mode: an output row; in PARTIAL mode: a partial row */
static void
worker_send_output(void *arg, RowKind kind, TupleTableSlot *row)
{
	ParWorker  *w = (ParWorker *) arg;

	w->stats.rows_passed++;
	send_slot(w, w->shared->mode == PTF_PARALLEL_PARTIAL ? PAR_MSG_PARTIAL : PAR_MSG_OUTPUT,
			  row);
}

/*
 * Rows of an input: counted, then on into the frame.  A leader
 * reading an input of a SPLIT or PARTIAL call (drain_par set) takes what
 * the workers sent every PAR_DRAIN_ROWS of its rows: their outboxes block
 * when full, and a worker should not wait for a whole chunk of the
 * leader's.
 */
typedef struct CountingSink
{
	PtfRowSink	sink;
	void	   *arg;
	uint64		rows;
	PtfParallel *drain_par;		/* the leader's, or NULL */
} CountingSink;

#define PAR_DRAIN_ROWS 1024

static void drain(PtfParallel *par, bool nowait);

static void
counting_push(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	CountingSink *cs = (CountingSink *) arg;

	cs->rows++;
	cs->sink(cs->arg, kind, row, meta);
	if (cs->drain_par != NULL && cs->rows % PAR_DRAIN_ROWS == 0)
		drain(cs->drain_par, true);
}

/*
 * BY_KEY: of a whole read of the input, the rows whose keys are in the
 * shares of mask, on into sink (the others go no further than their key's
 * hash).  A key's share is the high bits of its hash: the keyed state
 * indexes by the low ones, which stay spread.
 */
typedef struct KeyShareSink
{
	PtfRowSink	sink;
	void	   *arg;
	KeySpec    *keys;			/* a copy: the operator probes with its own */
	int			nshares;
	uint64		mask;
	bool		all;			/* every share: nothing to sort out */
	uint64		rows;			/* passed on */
	PtfParallel *drain_par;		/* the leader's, or NULL */
	uint64		seen;			/* rows read, passed on or not */
} KeyShareSink;

static inline int
key_share(uint32 hash, int nshares)
{
	return (int) (((uint64) hash * (uint64) nshares) >> 32);
}

static void
key_share_push(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	KeyShareSink *ks = (KeyShareSink *) arg;

	/* by the rows read: a leader's share may pass few of them on */
	if (ks->drain_par != NULL && ++ks->seen % PAR_DRAIN_ROWS == 0)
		drain(ks->drain_par, true);
	if (!ks->all &&
		!(ks->mask & (UINT64CONST(1) << key_share(key_probe(ks->keys, row), ks->nshares))))
		return;
	ks->rows++;
	ks->sink(ks->arg, kind, row, meta);
}

static uint64
key_shares_run(ChunkScan *scan, KeySpec *keys, int nshares, uint64 mask, PtfRowSink sink,
			   void *arg, PtfParallel *drain_par)
{
	KeyShareSink ks;

	Assert(nshares >= 1 && nshares <= PAR_MAX_KEY_SHARES && mask != 0);
	ks.sink = sink;
	ks.arg = arg;
	ks.keys = keys;
	ks.nshares = nshares;
	ks.mask = mask;
	ks.all = (mask == (nshares == PAR_MAX_KEY_SHARES ? ~UINT64CONST(0) :
					   (UINT64CONST(1) << nshares) - 1));
	ks.rows = 0;
	ks.drain_par = drain_par;
	ks.seen = 0;
	whole_scan_run(scan, key_share_push, &ks);
	return ks.rows;
}

static PtfOperator *
no_spill_factory(void *arg, bool unbounded)
{
	elog(ERROR, "the partial operator of a parallel call does not spill");
	return NULL;				/* keep compiler quiet */
}

void
ptf_parallel_worker_run(PtfCall *call)
{
	ParWorker  *w = par_worker;
	ParShared  *shared = w->shared;
	PtfOperator *op;
	PtfFrame   *frame;
	ChunkScan	scan;
	KeySpec    *share_keys = NULL;
	bool		ordered = mode_ordered(shared->mode);
	int			i;

	memset(&scan, 0, sizeof(scan));
	if (call->parallel != shared->mode || call->parallel_input != shared->split_input)
		elog(ERROR, "a parallel worker of %s would split the call otherwise than its leader",
			 call->function);
	w->call = call;
	call->parallel_role = PTF_ROLE_WORKER;
	w->stats.cpu_us = cpu_time_us();
	w->stats.pid = MyProcPid;
	if (ordered)
	{
		PtfCallInput *in = &call->inputs[0];
		PtfOperatorEnv env;

		memset(&env, 0, sizeof(env));
		env.cxt = call->cxt;
		env.mem_limit = get_hash_memory_limit();
		env.emit = worker_pass_row;
		env.emit_arg = w;
		/* sized once for the keys the planner expects, as the serial call's state */
		ptf_call_key_estimates(in->arg.relid, in->frame.keys, &env.expected_keys,
							   &env.key_range);
		op = dedup_partial_create(key_spec_copy(in->frame.keys, in->frame.rowdesc),
								  shared->mode == PTF_PARALLEL_FIRST_EVENT, &env);
		frame = frame_create(false, no_spill_factory, NULL);
		in->handle = frame_add_input(frame, &in->frame);
	}
	else
	{
		/* the operator's output (or partial rows) goes to the leader, spilled partitions' too */
		call->emit = worker_send_output;
		call->emit_arg = w;
		if (shared->mode == PTF_PARALLEL_BY_KEY)
			call->keys_share_of = shared->nchunks;
		op = ptf_call_build_operator(call, false);
		frame = frame_create(call->need_proc_time, ptf_call_spill_factory, call);
		for (i = 0; i < call->ninputs; i++)
			call->inputs[i].handle = frame_add_input(frame, &call->inputs[i].frame);
	}
	call->frame = frame;
	frame_start(frame, op);

	for (i = 0; i < call->ninputs; i++)
	{
		PtfCallInput *in = &call->inputs[i];
		PtfRowSink	sink = in->adapter ? in->adapter : frame_push;
		void	   *arg = in->adapter ? in->adapter_arg : (void *) in->handle;

		if (i != shared->split_input)
		{
			CountingSink counter = {sink, arg, 0, NULL};

			Assert(!ordered);
			sql_input_run_in_active_snapshot(&in->sql, counting_push, &counter);
			w->stats.other_rows += counter.rows;
			continue;
		}
		chunk_scan_prepare(&scan, in, shared);
		if (shared->mode == PTF_PARALLEL_BY_KEY)
			share_keys = key_spec_copy(in->frame.keys, in->frame.rowdesc);
		for (;;)
		{
			CountingSink counter = {sink, arg, 0, NULL};
			int			c = claim_chunk(shared, ParallelWorkerNumber);

			if (c < 0)
				break;
			if (shared->mode == PTF_PARALLEL_BY_KEY)
				counter.rows = key_shares_run(&scan, share_keys, shared->nchunks,
											  UINT64CONST(1) << c, sink, arg, NULL);
			else
				chunk_scan_run(&scan, c, counting_push, &counter);
			w->stats.rows_read += counter.rows;
			w->stats.chunks++;
			if (ordered)
			{
				/* every row of the chunk through the filter, then its end */
				frame_flush(frame);
				batch_flush(w);
				outbox_put(&w->outbox, PAR_MSG_END, c, 0, NULL, 0);
			}
		}
	}
	chunk_scan_end(&scan);
	frame_finish(frame, true);
	frame_stats(frame, &w->stats.state);
	w->stats.cpu_us = cpu_time_us() - w->stats.cpu_us;
	{
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		w->stats.minflt = ru.ru_minflt;
	}
	batch_flush(w);
	outbox_put(&w->outbox, PAR_MSG_STATS, 0, 0, (const char *) &w->stats, sizeof(w->stats));
	outbox_pump(&w->outbox, false);
	if (w->outbox.spool != NULL)
		tuplestore_end(w->outbox.spool);
	w->outbox.spool = NULL;
}

/* Arguments of the SQL call: their types in a FuncExpr of constants, their values serialized. */
static Size
call_estimate(FuncExpr *expr, FunctionCallInfo fcinfo, char **exprstr)
{
	Size		size;
	ListCell   *lc;
	int			i = 0;

	*exprstr = nodeToString(expr);
	size = sizeof(int) + strlen(*exprstr) + 1;
	foreach(lc, expr->args)
	{
		Oid			type = exprType(lfirst(lc));
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(type, &typlen, &typbyval);
		size = add_size(size, datumEstimateSpace(fcinfo->args[i].value, fcinfo->args[i].isnull,
												 typbyval, typlen));
		i++;
	}
	return size;
}

static void
call_serialize(FuncExpr *expr, FunctionCallInfo fcinfo, const char *exprstr, char *dst)
{
	ListCell   *lc;
	int			len = strlen(exprstr) + 1;
	int			i = 0;

	memcpy(dst, &len, sizeof(int));
	memcpy(dst + sizeof(int), exprstr, len);
	dst += sizeof(int) + len;
	foreach(lc, expr->args)
	{
		Oid			type = exprType(lfirst(lc));
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(type, &typlen, &typbyval);
		datumSerialize(fcinfo->args[i].value, fcinfo->args[i].isnull, typbyval, typlen, &dst);
		i++;
	}
}

void
ptf_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	ParWorker	w;
	ParShared  *shared = shm_toc_lookup(toc, PAR_KEY_SHARED, false);
	char	   *src = shm_toc_lookup(toc, PAR_KEY_CALL, false);
	char	   *queues = shm_toc_lookup(toc, PAR_KEY_QUEUES, false);
	shm_mq	   *mq = (shm_mq *) (queues + (Size) ParallelWorkerNumber * PAR_QUEUE_SIZE);
	FuncExpr   *expr;
	FmgrInfo	flinfo;
	FunctionCallInfo fcinfo;
	ReturnSetInfo rsinfo;
	int			len;
	int			nargs;
	int			i;

	memset(&w, 0, sizeof(w));
	w.shared = shared;
	shm_mq_set_sender(mq, MyProc);
	w.outbox.mqh = shm_mq_attach(mq, seg, NULL);
	w.outbox.cxt = CurrentMemoryContext;
	w.outbox.blocking = !mode_ordered(shared->mode);
	initStringInfo(&w.outbox.pending);
	initStringInfo(&w.batch);
	enlargeStringInfo(&w.batch, PAR_BATCH_BYTES);

	memcpy(&len, src, sizeof(int));
	expr = (FuncExpr *) stringToNode(src + sizeof(int));
	src += sizeof(int) + len;
	nargs = list_length(expr->args);

	fmgr_info(shared->fn_oid, &flinfo);
	flinfo.fn_expr = (Node *) expr;
	memset(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	rsinfo.econtext = CreateStandaloneExprContext();
	rsinfo.allowedModes = SFRM_Materialize;
	rsinfo.returnMode = SFRM_ValuePerCall;
	fcinfo = palloc0(SizeForFunctionCallInfo(nargs));
	InitFunctionCallInfoData(*fcinfo, &flinfo, nargs, shared->fn_collation, NULL,
							 (Node *) &rsinfo);
	for (i = 0; i < nargs; i++)
		fcinfo->args[i].value = datumRestore(&src, &fcinfo->args[i].isnull);

	par_worker = &w;
	PG_TRY();
	{
		(void) FunctionCallInvoke(fcinfo);
	}
	PG_FINALLY();
	{
		par_worker = NULL;
	}
	PG_END_TRY();
	if (rsinfo.setResult != NULL)
		tuplestore_end(rsinfo.setResult);
	shm_mq_detach(w.outbox.mqh);
}

/* ---- the leader ---- */

struct PtfParallel
{
	PtfCall    *call;
	ParallelContext *pcxt;
	ParShared  *shared;
	ChunkScan  *scan;			/* the leader's reads of chunks */
	int			nworkers;		/* planned */
	int			nlaunched;
	shm_mq_handle **mqh;		/* per launched worker; NULL once detached */
	bool	   *done;			/* its stats came */
	TupleTableSlot *slot;		/* rows as received (heap tuples in the queue's bytes) */
	PtfFrameInput *partial;		/* PARTIAL: the frame's input of partial rows */
	MemoryContext rowcxt;		/* reset for every row received */
	uint64		own_rows;		/* the leader's share of the split input */
	int			own_chunks;
	int64		cpu_us;			/* the leader's, from the start (DEBUG1) */
	uint64		passed;			/* rows the workers passed on */
	uint64		worker_rows;	/* rows the workers read (see receive) */
	PtfFrameStats workers_state;	/* summed (see receive) */
	bool		leader_reads;	/* leader_participates() */
	bool		other_counted;	/* a worker's rows of the inputs read whole */
	bool		snapshot_pushed;
};

/* The workers PostgreSQL would plan for a parallel scan of rel (compute_parallel_worker). */
static int
planned_workers(Relation rel, BlockNumber nblocks)
{
	int			workers = RelationGetParallelWorkers(rel, -1);

	if (workers < 0)
	{
		int			threshold = Max(min_parallel_table_scan_size, 1);

		if (nblocks < (BlockNumber) min_parallel_table_scan_size)
			return 0;
		workers = 1;
		while (nblocks >= (BlockNumber) threshold * 3)
		{
			workers++;
			threshold *= 3;
			if (threshold > INT_MAX / 3)
				break;
		}
	}
	return Min(workers, max_parallel_workers_per_gather);
}

/* A plain heap table the workers can read as the leader does. */
static int	usable_cpus(void);

static bool
relation_ok(Relation rel)
{
	return (rel->rd_rel->relkind == RELKIND_RELATION ||
			rel->rd_rel->relkind == RELKIND_MATVIEW) &&
		rel->rd_rel->relpersistence != RELPERSISTENCE_TEMP &&
		!rel->rd_rel->relhassubclass &&
		rel->rd_tableam == GetHeapamTableAmRoutine();
}

/* Is every statement of plan (rewritten: row-level security quals included) parallel safe? */
static bool
plan_parallel_safe(SPIPlanPtr plan)
{
	ListCell   *lc;

	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *src = (CachedPlanSource *) lfirst(lc);
		ListCell   *lq;

		if (src->query_list == NIL)
			return false;
		foreach(lq, src->query_list)
			if (max_parallel_hazard(lfirst_node(Query, lq)) != PROPARALLEL_SAFE)
				return false;
	}
	return true;
}

bool
ptf_parallel_expr_safe(Node *expr)
{
	PlannerInfo root;
	PlannerGlobal glob;

	/* is_parallel_safe() walks expr unless glob says the whole query is safe */
	memset(&root, 0, sizeof(root));
	memset(&glob, 0, sizeof(glob));
	root.type = T_PlannerInfo;
	glob.type = T_PlannerGlobal;
	glob.maxParallelHazard = PROPARALLEL_UNSAFE;
	root.glob = &glob;
	return is_parallel_safe(&root, expr);
}

/*
 * How many workers the call gets by PostgreSQL's rule, and the number of
 * blocks of its split input; 0: it runs serially.
 */
static int
call_workers(PtfCall *call, BlockNumber *nblocks)
{
	FunctionCallInfo fcinfo = call->fcinfo;
	Node	   *expr;
	int			workers = 0;
	int			i;

	if (call->parallel == PTF_PARALLEL_NONE || call->uid != NULL || call->changes ||
		call->step != NULL || fcinfo == NULL || fcinfo->flinfo == NULL)
		return 0;
	if (max_parallel_workers_per_gather <= 0 ||
		IsInParallelMode() || !IsUnderPostmaster)
		return 0;
	expr = fcinfo->flinfo->fn_expr;
	if (expr == NULL || !IsA(expr, FuncExpr) ||
		list_length(((FuncExpr *) expr)->args) != fcinfo->nargs)
		return 0;
	if ((call->parallel == PTF_PARALLEL_SPLIT || call->parallel == PTF_PARALLEL_BY_KEY) &&
		call->emit != ptf_output_emit_row)
		return 0;
	if ((mode_ordered(call->parallel) || call->parallel == PTF_PARALLEL_BY_KEY) &&
		call->ninputs != 1)
		return 0;
	if (call->parallel == PTF_PARALLEL_PARTIAL &&
		(call->partial_desc == NULL || call->ninputs >= FRAME_MAX_INPUTS))
		return 0;

	for (i = 0; i < call->ninputs; i++)
	{
		PtfCallInput *in = &call->inputs[i];
		Relation	rel;
		bool		ok;

		if (in->query != NULL || !OidIsValid(in->arg.relid) || in->sql.changelog ||
			in->adapter != NULL || !key_spec_parallel_safe(in->frame.keys) ||
			!plan_parallel_safe(in->sql.plan))
			return 0;
		/* the call's planning already locked it */
		rel = relation_open(in->arg.relid, AccessShareLock);
		ok = relation_ok(rel);
		if (ok && i == call->parallel_input)
		{
			*nblocks = RelationGetNumberOfBlocks(rel);
			workers = planned_workers(rel, *nblocks);
		}
		relation_close(rel, AccessShareLock);
		if (!ok)
			return 0;
	}

	/*
	 * Partial states: a worker's are passed on and merged by the leader,
	 * the leader's own need neither.  When the workers would take every
	 * CPU (and the leader only merge, leader_participates), one worker
	 * fewer with the leader reading is faster (TUMBLE over 10M rows, 10k
	 * keys, 2 CPUs, paired calls: faster in 7 of 9 pairs, by up to a
	 * fifth; bench/README.md, Parallel calls).
	 */
	if (call->parallel == PTF_PARALLEL_PARTIAL && parallel_leader_participation &&
		workers > 1)
	{
		int			cpus = usable_cpus();

		if (cpus > 1 && workers >= cpus)
			workers = cpus - 1;
	}
	return workers;
}

/* The chunks of nblocks for participants. */
static void
plan_chunks(BlockNumber nblocks, int participants, BlockNumber *chunk_blocks, int *nchunks)
{
	BlockNumber size = nblocks / ((BlockNumber) participants * PAR_CHUNKS_PER_PARTICIPANT);

	size = Max(size, PAR_MIN_CHUNK_BLOCKS);
	size = Min(size, PAR_MAX_CHUNK_BLOCKS);
	*chunk_blocks = size;
	*nchunks = (int) Max((nblocks + size - 1) / size, 1);
}

/* The CPUs this process may run on (its affinity mask), or 0 when unknown. */
static int
usable_cpus(void)
{
#ifdef CPU_COUNT
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return CPU_COUNT(&set);
#endif
	return (int) Max(sysconf(_SC_NPROCESSORS_ONLN), 0);
}

/*
 * Is a CPU left for the leader beside nworkers workers?  Not known: yes,
 * as a Gather's leader reads.
 */
static bool
cpu_left_for_leader(int nworkers)
{
	int			cpus = usable_cpus();

	return cpus <= 0 || nworkers < cpus;
}

/*
 * Does the leader read chunks too?  As under a Gather: unless told not
 * to, with workers; SPLIT, PARTIAL and BY_KEY only if a CPU is left for
 * it (see the header).
 */
static bool
leader_participates(PtfParallelMode mode, int nlaunched)
{
	if (nlaunched == 0)
		return true;
	if (!parallel_leader_participation)
		return false;
	if (mode_ordered(mode))
		return true;
	return cpu_left_for_leader(nlaunched);
}

PtfParallel *
ptf_parallel_begin(PtfCall *call)
{
	PtfParallel *par;
	BlockNumber nblocks = 0;
	int			nworkers = call_workers(call, &nblocks);
	BlockNumber chunk_blocks;
	int			nchunks;
	ChunkScan  *scan = palloc(sizeof(ChunkScan));
	FuncExpr   *orig;
	FuncExpr   *expr;
	ListCell   *lc;
	char	   *exprstr;
	Size		call_size;
	Size		shared_size;
	ParallelContext *pcxt;
	char	   *queues = NULL;
	int			i;

	if (nworkers <= 0)
		return NULL;

	/* the input's statement, read by block range */
	chunk_scan_prepare(scan, &call->inputs[call->parallel_input], NULL);
	if (!sql_input_reads_by_ranges(&scan->sql))
		return NULL;

	/* the call's arguments as the workers get them: types in constants, values apart */
	orig = (FuncExpr *) call->fcinfo->flinfo->fn_expr;
	expr = makeNode(FuncExpr);
	*expr = *orig;
	expr->args = NIL;
	foreach(lc, orig->args)
		expr->args = lappend(expr->args,
							 makeNullConst(exprType(lfirst(lc)), exprTypmod(lfirst(lc)),
										   exprCollation(lfirst(lc))));
	call_size = call_estimate(expr, call->fcinfo, &exprstr);

	if (call->parallel == PTF_PARALLEL_BY_KEY)
	{
		/*
		 * A share of the keys for each worker, and one for the leader if a
		 * CPU is left for it: one worker on two CPUs held every key while
		 * the leader only emitted its rows (HOP over 10k keys, 10M rows,
		 * parallel_leader_participation off: 0.88-1.26x the serial call;
		 * with the leader's share 0.56-0.72x).
		 */
		bool		leader_share;

		nworkers = Min(nworkers, PAR_MAX_KEY_SHARES - 1);
		leader_share = parallel_leader_participation && cpu_left_for_leader(nworkers);
		chunk_blocks = 0;
		nchunks = nworkers + (leader_share ? 1 : 0);
	}
	else
		plan_chunks(nblocks, nworkers + 1, &chunk_blocks, &nchunks);
	shared_size = add_size(offsetof(ParShared, owner), mul_size(sizeof(int), nchunks));

	par = palloc0(sizeof(PtfParallel));
	par->call = call;
	call->parallel_role = PTF_ROLE_LEADER;
	par->nworkers = nworkers;
	par->scan = scan;
	par->cpu_us = cpu_time_us();

	/* the input is read in a snapshot of its own, as the serial call's SPI statement is */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	par->snapshot_pushed = true;
	EnterParallelMode();
	pcxt = CreateParallelContext("$libdir/deduplicate_keep_first", "ptf_parallel_main",
								 nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, shared_size);
	shm_toc_estimate_chunk(&pcxt->estimator, call_size);
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(PAR_QUEUE_SIZE, nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 3);
	InitializeParallelDSM(pcxt);
	par->pcxt = pcxt;

	par->shared = shm_toc_allocate(pcxt->toc, shared_size);
	scan->shared = par->shared;
	par->shared->fn_oid = call->fcinfo->flinfo->fn_oid;
	par->shared->fn_collation = call->fcinfo->fncollation;
	par->shared->mode = call->parallel;
	par->shared->split_input = call->parallel_input;
	par->shared->chunk_blocks = chunk_blocks;
	par->shared->nchunks = nchunks;
	SpinLockInit(&par->shared->mutex);
	par->shared->next_chunk = 0;
	for (i = 0; i < nchunks; i++)
		par->shared->owner[i] = PAR_OWNER_NONE;
	shm_toc_insert(pcxt->toc, PAR_KEY_SHARED, par->shared);
	{
		char	   *dst = shm_toc_allocate(pcxt->toc, call_size);

		call_serialize(expr, call->fcinfo, exprstr, dst);
		shm_toc_insert(pcxt->toc, PAR_KEY_CALL, dst);
	}
	if (pcxt->seg != NULL)
	{
		queues = shm_toc_allocate(pcxt->toc, mul_size(PAR_QUEUE_SIZE, nworkers));
		for (i = 0; i < nworkers; i++)
		{
			shm_mq	   *mq = shm_mq_create(queues + (Size) i * PAR_QUEUE_SIZE, PAR_QUEUE_SIZE);

			shm_mq_set_receiver(mq, MyProc);
		}
		shm_toc_insert(pcxt->toc, PAR_KEY_QUEUES, queues);
		LaunchParallelWorkers(pcxt);
	}
	par->nlaunched = pcxt->nworkers_launched;
	par->leader_reads = leader_participates(call->parallel, par->nlaunched);
	/*
	 * By key, the workers hold every key but the leader's share, if it
	 * reads: its state starts empty, or sized for a share.
	 */
	if (call->parallel == PTF_PARALLEL_BY_KEY && par->nlaunched > 0)
		call->keys_share_of = par->leader_reads ? nchunks : -1;
	par->mqh = palloc0(sizeof(shm_mq_handle *) * Max(par->nlaunched, 1));
	par->done = palloc0(sizeof(bool) * Max(par->nlaunched, 1));
	for (i = 0; i < par->nlaunched; i++)
		par->mqh[i] = shm_mq_attach((shm_mq *) (queues + (Size) i * PAR_QUEUE_SIZE),
									pcxt->seg, pcxt->worker[i].bgwhandle);
	return par;
}

/*
 * A worker left without saying it finished: its error, if it sent one,
 * else ours.  The queues are detached first: a worker waiting on a full
 * one (a blocking outbox) would otherwise never finish.
 */
static void
worker_lost(PtfParallel *par, int w)
{
	int			i;

	for (i = 0; i < par->nlaunched; i++)
		if (par->mqh[i] != NULL)
		{
			shm_mq_detach(par->mqh[i]);
			par->mqh[i] = NULL;
		}
	WaitForParallelWorkersToFinish(par->pcxt);
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("parallel worker %d of %s exited without finishing its share",
					w, par->call->function),
			 errhint("Set max_parallel_workers_per_gather = 0 to run the call in one process; the server log may say why the worker stopped.")));
}

/*
 * The next message of worker w; false when there is none now (nowait) or
 * the worker is gone, having finished.
 */
static bool
receive(PtfParallel *par, int w, bool nowait, ParMsg **msg, char **payload, Size *len)
{
	Size		nbytes;
	void	   *data;
	shm_mq_result res;

	if (par->mqh[w] == NULL)
		return false;
	res = shm_mq_receive(par->mqh[w], &nbytes, &data, nowait);
	if (res == SHM_MQ_WOULD_BLOCK)
		return false;
	if (res == SHM_MQ_DETACHED)
	{
		shm_mq_detach(par->mqh[w]);
		par->mqh[w] = NULL;
		if (!par->done[w])
			worker_lost(par, w);
		return false;
	}
	Assert(nbytes >= PAR_MSG_HEADER);
	*msg = (ParMsg *) data;
	*payload = (char *) data + PAR_MSG_HEADER;
	*len = nbytes - PAR_MSG_HEADER;
	if ((*msg)->tag == PAR_MSG_STATS)
	{
		ParWorkerStats st;

		Assert(*len == sizeof(st));
		memcpy(&st, *payload, sizeof(st));
		par->worker_rows += st.rows_read;
		frame_stats_add_state(&par->workers_state, &st.state);
		/* every participant reads them whole; the serial call counts them once */
		if (!par->leader_reads && !par->other_counted)
		{
			par->worker_rows += st.other_rows;
			par->other_counted = true;
		}
		par->done[w] = true;
		elog(DEBUG1, "parallel worker %d (pid %d): %d chunks, " UINT64_FORMAT " rows read, " UINT64_FORMAT " passed on, %.1f ms CPU, %ld page faults",
			 w, st.pid, st.chunks, st.rows_read, st.rows_passed, st.cpu_us / 1000.0, (long) st.minflt);
	}
	return true;
}

/*
 * The rows of a batch, one after the other in the leader's slot (each
 * valid until the next), handed to sink.
 */
static void
batch_rows(PtfParallel *par, ParMsg *msg, char *payload, Size len,
		   void (*sink) (PtfParallel *par, TupleTableSlot *row))
{
	char	   *p = payload;
	MemoryContext old;
	int32		i;

	for (i = 0; i < msg->nrows; i++)
	{
		MinimalTuple mt = (MinimalTuple) p;
		HeapTupleData tuple;

		Assert(p + mt->t_len <= payload + len);

		/*
		 * Seen as a heap tuple in place, as a minimal-tuple slot does
		 * internally (the bytes before it, the header or the previous row,
		 * stand for the fields a minimal tuple lacks): the frame then takes
		 * it without making a heap tuple of it first.
		 */
		tuple.t_len = mt->t_len + MINIMAL_TUPLE_OFFSET;
		tuple.t_data = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = InvalidOid;
		ExecStoreHeapTuple(&tuple, par->slot, false);
		/* as an input's rows come: what the row's processing allocates goes with it */
		MemoryContextReset(par->rowcxt);
		old = MemoryContextSwitchTo(par->rowcxt);
		sink(par, par->slot);
		MemoryContextSwitchTo(old);
		ExecClearTuple(par->slot);
		p += MAXALIGN(mt->t_len);
	}
	Assert(p == payload + len);
}

/* a worker's output row (SPLIT): the call's, as if the leader made it */
static void
emit_output(PtfParallel *par, TupleTableSlot *row)
{
	par->call->emit(par->call->emit_arg, ROWKIND_INSERT, row);
}

/* a row a worker passed on: into the leader's frame */
static void
push_row(PtfParallel *par, TupleTableSlot *row)
{
	par->passed++;
	frame_push(par->call->inputs[0].handle, ROWKIND_INSERT, row, NULL);
}

/* a worker's partial row: into the leader's frame, for its operator to combine */
static void
push_partial(PtfParallel *par, TupleTableSlot *row)
{
	par->passed++;
	frame_push(par->partial, ROWKIND_INSERT, row, NULL);
}

static void
handle_output(PtfParallel *par, ParMsg *msg, char *payload, Size len)
{
	if (msg->tag == PAR_MSG_OUTPUT)
		batch_rows(par, msg, payload, len, emit_output);
	else if (msg->tag == PAR_MSG_PARTIAL)
		batch_rows(par, msg, payload, len, push_partial);
	else if (msg->tag != PAR_MSG_STATS)
		elog(ERROR, "unexpected message '%c' from a parallel worker", msg->tag);
}

/*
 * What the workers have to say: until a round finds no message (nowait),
 * or everything until each has finished.  A message from each worker in
 * turn, and a wait only when no queue has one: a worker whose queue is
 * full waits for the leader (blocking outbox), and waiting on one worker
 * until it finished would leave the others idle meanwhile.  A leader
 * behind its workers may stay here for the rest of the call: it answers
 * a cancel every round.
 */
static void
drain(PtfParallel *par, bool nowait)
{
	for (;;)
	{
		bool		open = false;
		bool		got = false;
		int			w;

		CHECK_FOR_INTERRUPTS();
		for (w = 0; w < par->nlaunched; w++)
		{
			ParMsg	   *msg;
			char	   *payload;
			Size		len;

			if (par->mqh[w] == NULL)
				continue;
			open = true;
			if (receive(par, w, true, &msg, &payload, &len))
			{
				handle_output(par, msg, payload, len);
				got = true;
			}
		}
		if (!open || (nowait && !got))
			return;
		if (!got)
		{
			/* a worker's send or exit sets our latch (shm_mq, bgw_notify_pid) */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 WAIT_EVENT_MQ_RECEIVE);
			ResetLatch(MyLatch);
		}
	}
}

static void
counted_chunk(PtfParallel *par, ChunkScan *scan, int c, PtfRowSink sink, void *arg,
			  bool drain)
{
	CountingSink counter = {sink, arg, 0, drain ? par : NULL};

	chunk_scan_run(scan, c, counting_push, &counter);
	par->own_rows += counter.rows;
	par->own_chunks++;
}

/*
 * Keep-first: chunks combined in chunk order -- the leader's own read
 * straight into the frame, a worker's as it passed them on, up to its end
 * of the chunk.  The leader takes a chunk only when it is the next to
 * combine, or the one after a worker's chunk it is about to wait for,
 * read once that chunk is combined; a chunk a worker holds is waited for
 * (workers never wait for the leader: they spool).
 */
static void
run_ordered(PtfParallel *par)
{
	ParShared  *shared = par->shared;
	PtfCallInput *in = &par->call->inputs[0];
	int			m;

	for (m = 0; m < shared->nchunks; m++)
	{
		int			owner;

		for (;;)
		{
			SpinLockAcquire(&shared->mutex);
			if (shared->next_chunk == m && par->leader_reads)
			{
				shared->next_chunk++;
				shared->owner[m] = PAR_OWNER_LEADER;
			}
			owner = shared->owner[m];

			/*
			 * A worker's chunk is waited for: the chunk after it, if no
			 * one has it yet, is the leader's to read next.  Otherwise
			 * the worker that finishes m takes m + 1 before the leader
			 * has combined m, and the leader, never finding the next
			 * chunk free, only combines while the workers read it all.
			 */
			if (owner != PAR_OWNER_NONE && owner != PAR_OWNER_LEADER &&
				shared->next_chunk == m + 1 && m + 1 < shared->nchunks &&
				par->leader_reads)
			{
				shared->next_chunk++;
				shared->owner[m + 1] = PAR_OWNER_LEADER;
			}
			SpinLockRelease(&shared->mutex);
			if (owner != PAR_OWNER_NONE)
				break;
			/* parallel_leader_participation = off: a worker will take it */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}

		if (owner == PAR_OWNER_LEADER)
			counted_chunk(par, par->scan, m, frame_push, in->handle, false);
		else
		{
			ParMsg	   *msg;
			char	   *payload;
			Size		len;

			for (;;)
			{
				if (!receive(par, owner, false, &msg, &payload, &len))
					worker_lost(par, owner);
				if (msg->tag == PAR_MSG_END)
				{
					Assert(msg->chunk == m);
					break;
				}
				if (msg->tag != PAR_MSG_ROW)
					elog(ERROR, "unexpected message '%c' from a parallel worker", msg->tag);
				batch_rows(par, msg, payload, len, push_row);
			}
		}
	}
	drain(par, false);
}

/*
 * SPLIT, PARTIAL: the other inputs read whole, then chunks of the split
 * one as the leader can claim them, what the workers send taken every
 * PAR_DRAIN_ROWS rows the leader reads; the rest of it after.  BY_KEY: the
 * leader reads the shares it claims, each a whole read, taking what the
 * workers send the same way; none started, every share in one read.
 */
static void
run_split(PtfParallel *par)
{
	PtfCall    *call = par->call;
	int			i;

	for (i = 0; i < call->ninputs && par->leader_reads; i++)
	{
		PtfCallInput *in = &call->inputs[i];
		int			c;

		if (i != par->shared->split_input)
		{
			CountingSink counter = {frame_push, in->handle, 0, par};

			sql_input_run_in_active_snapshot(&in->sql, counting_push, &counter);
			drain(par, true);
			continue;
		}
		if (par->shared->mode == PTF_PARALLEL_BY_KEY && par->nlaunched == 0)
		{
			/* no worker started: every share, in one read */
			uint64		mask = 0;

			while ((c = claim_chunk(par->shared, PAR_OWNER_LEADER)) >= 0)
			{
				mask |= UINT64CONST(1) << c;
				par->own_chunks++;
			}
			if (mask != 0)
				par->own_rows += key_shares_run(par->scan, in->frame.keys,
												par->shared->nchunks, mask,
												frame_push, in->handle, NULL);
			continue;
		}
		if (par->shared->mode == PTF_PARALLEL_BY_KEY)
		{
			/*
			 * A share, read whole as a worker reads one (its keys probed
			 * with a copy, as a worker's: the operator probes with its
			 * own), taking what the workers send every PAR_DRAIN_ROWS rows
			 * read: their queues block when full
			 */
			KeySpec    *share_keys = NULL;

			while ((c = claim_chunk(par->shared, PAR_OWNER_LEADER)) >= 0)
			{
				if (share_keys == NULL)
					share_keys = key_spec_copy(in->frame.keys, in->frame.rowdesc);
				par->own_rows += key_shares_run(par->scan, share_keys,
												par->shared->nchunks,
												UINT64CONST(1) << c,
												frame_push, in->handle, par);
				par->own_chunks++;
				drain(par, true);
			}
			continue;
		}
		while ((c = claim_chunk(par->shared, PAR_OWNER_LEADER)) >= 0)
		{
			counted_chunk(par, par->scan, c, frame_push, in->handle, true);
			drain(par, true);
		}
	}
	drain(par, false);
}

void
ptf_parallel_add_inputs(PtfParallel *par, PtfFrame *frame)
{
	PtfCall    *call = par->call;
	PtfFrameInputSpec spec;

	if (call->parallel != PTF_PARALLEL_PARTIAL)
		return;
	memset(&spec, 0, sizeof(spec));
	spec.name = "partial";
	spec.rowdesc = call->partial_desc;
	spec.keys = call->partial_keys;
	par->partial = frame_add_input(frame, &spec);
}

void
ptf_parallel_run(PtfParallel *par)
{
	PtfCall    *call = par->call;

	par->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf parallel row",
										ALLOCSET_DEFAULT_SIZES);

	if (par->shared->mode == PTF_PARALLEL_SPLIT || par->shared->mode == PTF_PARALLEL_BY_KEY)
	{
		par->slot = MakeSingleTupleTableSlot(call->out->desc, &TTSOpsHeapTuple);
		run_split(par);
	}
	else if (par->shared->mode == PTF_PARALLEL_PARTIAL)
	{
		Assert(par->partial != NULL);
		par->slot = MakeSingleTupleTableSlot(call->partial_desc, &TTSOpsHeapTuple);
		run_split(par);
	}
	else
	{
		par->slot = MakeSingleTupleTableSlot(call->inputs[0].frame.rowdesc,
											 &TTSOpsHeapTuple);
		run_ordered(par);
	}
	ExecDropSingleTupleTableSlot(par->slot);
	par->slot = NULL;
	MemoryContextDelete(par->rowcxt);
}

void
ptf_parallel_end(PtfParallel *par, PtfParallelStats *stats)
{
	/* the shared memory goes with the parallel context */
	int			nchunks = par->shared->nchunks;
	bool		by_key = (par->shared->mode == PTF_PARALLEL_BY_KEY);

	chunk_scan_end(par->scan);
	WaitForParallelWorkersToFinish(par->pcxt);
	DestroyParallelContext(par->pcxt);
	par->pcxt = NULL;
	ExitParallelMode();
	if (par->snapshot_pushed)
		PopActiveSnapshot();
	par->snapshot_pushed = false;

	elog(DEBUG1, "parallel leader: %d of %d chunks, " UINT64_FORMAT " rows read, " UINT64_FORMAT " passed on by %d workers, %.1f ms CPU",
		 par->own_chunks, nchunks, par->own_rows, par->passed, par->nlaunched,
		 (cpu_time_us() - par->cpu_us) / 1000.0);
	stats->workers_planned = par->nworkers;
	stats->workers_launched = par->nlaunched;
	stats->rows_from_workers = par->passed;
	stats->worker_rows = par->worker_rows;
	stats->by_key = by_key;
	stats->workers_state = par->workers_state;
}

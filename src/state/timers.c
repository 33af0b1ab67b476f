/*-------------------------------------------------------------------------
 *
 * timers.c
 *	  An operator's timers: one binary min-heap per time domain, ordered by
 *	  (time, seq), in an array that doubles as it grows.
 *
 * Why not lib/binaryheap.h?  It holds Datums and calls a comparator per
 * step; timers are 40-byte structs compared inline, and there may be
 * millions of them (one per pending candidate of a large keep-first).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "state/timers.h"

typedef struct TimerHeap
{
	PtfTimer   *items;
	uint64		n;
	uint64		cap;
} TimerHeap;

struct TimerService
{
	MemoryContext cxt;
	TimerHeap	heaps[2];		/* by PtfTimeDomain */
	uint64		next_seq;
};

TimerService *
timer_service_create(MemoryContext cxt)
{
	TimerService *ts = MemoryContextAllocZero(cxt, sizeof(TimerService));

	ts->cxt = cxt;
	return ts;
}

static inline bool
timer_before(const PtfTimer *a, const PtfTimer *b)
{
	if (a->time != b->time)
		return a->time < b->time;
	return a->seq < b->seq;
}

static void
heap_push(TimerService *ts, TimerHeap *h, const PtfTimer *t)
{
	uint64		i;

	if (h->n >= h->cap)
	{
		h->cap = Max(1024, h->cap * 2);
		h->items = h->items == NULL ?
			MemoryContextAllocHuge(ts->cxt, sizeof(PtfTimer) * h->cap) :
			repalloc_huge(h->items, sizeof(PtfTimer) * h->cap);
	}
	i = h->n++;
	while (i > 0)
	{
		uint64		parent = (i - 1) / 2;

		if (!timer_before(t, &h->items[parent]))
			break;
		h->items[i] = h->items[parent];
		i = parent;
	}
	h->items[i] = *t;
}

/* Put t at position i or below it, where it keeps the heap in order. */
static void
sift_down(TimerHeap *h, uint64 i, PtfTimer t)
{
	for (;;)
	{
		uint64		child = 2 * i + 1;

		if (child >= h->n)
			break;
		if (child + 1 < h->n && timer_before(&h->items[child + 1], &h->items[child]))
			child++;
		if (!timer_before(&h->items[child], &t))
			break;
		h->items[i] = h->items[child];
		i = child;
	}
	h->items[i] = t;
}

static void
heap_pop(TimerHeap *h)
{
	PtfTimer	last;

	Assert(h->n > 0);
	last = h->items[--h->n];
	if (h->n > 0)
		sift_down(h, 0, last);
}

void
timer_register_seq(TimerService *ts, PtfTimeDomain domain, PtfTime time, uint64 seq,
				   StateRecord *rec, int64 ns, int32 tag)
{
	PtfTimer	t;

	t.time = time;
	t.seq = seq;
	t.rec = rec;
	t.ns = ns;
	t.tag = tag;
	if (seq >= ts->next_seq)
		ts->next_seq = seq + 1;
	heap_push(ts, &ts->heaps[domain], &t);
}

void
timer_register(TimerService *ts, PtfTimeDomain domain, PtfTime time,
			   StateRecord *rec, int64 ns, int32 tag)
{
	timer_register_seq(ts, domain, time, ts->next_seq, rec, ns, tag);
}

bool
timer_pop_due(TimerService *ts, PtfTimeDomain domain, PtfTime upto, PtfTimer *timer)
{
	TimerHeap  *h = &ts->heaps[domain];

	if (h->n == 0 || h->items[0].time > upto)
		return false;
	*timer = h->items[0];
	heap_pop(h);
	return true;
}

void
timer_forget_removed(TimerService *ts)
{
	int			d;

	for (d = 0; d < 2; d++)
	{
		TimerHeap  *h = &ts->heaps[d];
		uint64		kept = 0;
		uint64		i;

		for (i = 0; i < h->n; i++)
			if (h->items[i].rec == NULL || !(h->items[i].rec->flags & RECORD_REMOVED))
				h->items[kept++] = h->items[i];
		if (kept == h->n)
			continue;
		/* what is left, a heap again (Floyd's) */
		h->n = kept;
		for (i = h->n / 2; i-- > 0;)
			sift_down(h, i, h->items[i]);
	}
}

PtfTime
timer_next_time(TimerService *ts, PtfTimeDomain domain)
{
	TimerHeap  *h = &ts->heaps[domain];

	return h->n == 0 ? PTF_TIME_MAX : h->items[0].time;
}

uint64
timer_count(TimerService *ts, PtfTimeDomain domain)
{
	return ts->heaps[domain].n;
}

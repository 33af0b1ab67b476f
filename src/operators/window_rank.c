/*-------------------------------------------------------------------------
 *
 * window_rank.c
 *	  Window Top-N (Flink's WindowRankOperator): per window and key, the
 *	  first N rows in an order, emitted with their row numbers 1 .. N once,
 *	  when the window fires; window deduplication is N = 1 ordered by time.
 *
 * Windows are the TVFs' (window_assign): a row goes to every window that
 * holds it.  Each (key, window) keeps a list of at most N rows, sorted by
 * the order with PostgreSQL's sort support (the ORDER BY's operators,
 * collations and NULLS FIRST/LAST); rows that compare equal keep their
 * arrival order, as Flink's ranking does.  A row that does not beat the
 * N-th kept row costs one comparison, so a window's state is bounded by
 * N rows whatever its input -- Flink's point against sorting it whole.
 * Lists are kept per window, not per slice as the window aggregate does:
 * a top-N list cannot be retracted from or merged without keeping more
 * than N rows, and a row is compared once per window it belongs to.
 *
 * Time is the window aggregate's: a window fires when the watermark
 * reaches its end - 1 ms (an event-time timer per key and window, ns =
 * the window's end); a row whose windows have all fired is late (dropped,
 * counted); one some of whose windows have fired still goes to the
 * others.  Without a watermark (a bounded input) everything fires at the
 * end, in window-end order.
 *
 * Input is insert-only, as Flink's: updates and deletes of a change
 * stream are passed over and counted, as the TVFs pass them over.
 *
 * Durable state (a uid): per (key, window) its rows, and fires_at, the
 * window's timer (its end - 1 ms), exact.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"

#include "base/ptf_time.h"
#include "operators/window_rank.h"

#define MS	1000				/* window_time = end - 1 ms */
#define SPACE_WINDOWS 0
#define TIMER_WINDOW 1

/* A window's first rows, in order. */
typedef struct RankList
{
	int32		n;				/* rows kept: at most the limit */
	int32		cap;
	MinimalTuple *rows;
	Datum	   *vals;			/* the sort columns of rows[i]: vals[i * nsort + k] */
	bool	   *nulls;
} RankList;

typedef struct WinRankOp
{
	PtfOperator base;
	WindowSpec	spec;
	bool		global;
	Oid			time_type;
	bool		gap_warned;		/* a bound in a daylight-saving gap was warned of */
	TupleDesc	rowdesc;
	int64		limit;
	int			nsort;
	AttrNumber *sort_attnos;
	SortSupportData *ssup;
	bool		byval;			/* every sort column is passed by value */

	/* scratch */
	PtfTime    *ends;			/* a row's windows */
	int			maxends;
	Datum	   *rowvals;		/* the row's sort columns */
	bool	   *rownulls;
	TupleTableSlot *scratch;	/* a kept row, read */
	MemoryContext firecxt;		/* one window's output, reset after it */

	/* output */
	TupleDesc	outdesc;
	RankColumn *out_cols;
	AttrNumber *out_attnos;
	TupleTableSlot *out;

	uint64		skipped;
} WinRankOp;

enum
{
	FIELD_ROWS,
	FIELD_FIRES_AT
};

static const StateField window_rank_fields[] = {
	{"rows", SF_IMAGES, 0},
	{"fires_at", SF_TIME, 0},
};

/* a (key, window) row holds its window's timer, end - 1 ms */
const StateLayout window_rank_layout = {lengthof(window_rank_fields), window_rank_fields,
"fires_at"};

static inline bool
fired(PtfTime end, PtfTime watermark)
{
	return end - MS <= watermark;
}

/* -- the lists -- */

static int
compare(WinRankOp *wr, const Datum *v1, const bool *n1, const Datum *v2, const bool *n2)
{
	int			k;

	for (k = 0; k < wr->nsort; k++)
	{
		int			c = ApplySortComparator(v1[k], n1[k], v2[k], n2[k], &wr->ssup[k]);

		if (c != 0)
			return c;
	}
	return 0;
}

/* the sort columns of a kept row, which they point into */
static void
read_sort_values(WinRankOp *wr, MinimalTuple mt, Datum *vals, bool *nulls)
{
	int			k;

	ExecStoreMinimalTuple(mt, wr->scratch, false);
	for (k = 0; k < wr->nsort; k++)
		vals[k] = slot_getattr(wr->scratch, wr->sort_attnos[k], &nulls[k]);
	ExecClearTuple(wr->scratch);
}

/*
 * Keep row mt (copied in by the caller) at position pos of l; vals/nulls
 * are its sort columns when they are passed by value (else NULL: read
 * from mt, which they then point into).
 */
static void
list_insert(WinRankOp *wr, RankList *l, int pos, MinimalTuple mt, const Datum *vals,
			const bool *nulls)
{
	int			nsort = wr->nsort;

	Assert(l->n < wr->limit && pos <= l->n);
	if (l->n == l->cap)
	{
		MemoryContext cxt = keyed_state_context(wr->base.state);
		int64		cap = Min(wr->limit, Max(4, (int64) l->cap * 2));

		if (l->rows == NULL)
		{
			l->rows = MemoryContextAlloc(cxt, sizeof(MinimalTuple) * cap);
			l->vals = MemoryContextAlloc(cxt, sizeof(Datum) * cap * Max(nsort, 1));
			l->nulls = MemoryContextAlloc(cxt, sizeof(bool) * cap * Max(nsort, 1));
		}
		else
		{
			l->rows = repalloc(l->rows, sizeof(MinimalTuple) * cap);
			l->vals = repalloc(l->vals, sizeof(Datum) * cap * Max(nsort, 1));
			l->nulls = repalloc(l->nulls, sizeof(bool) * cap * Max(nsort, 1));
		}
		l->cap = (int32) cap;
	}
	memmove(&l->rows[pos + 1], &l->rows[pos], sizeof(MinimalTuple) * (l->n - pos));
	memmove(&l->vals[(pos + 1) * nsort], &l->vals[pos * nsort],
			sizeof(Datum) * (l->n - pos) * nsort);
	memmove(&l->nulls[(pos + 1) * nsort], &l->nulls[pos * nsort],
			sizeof(bool) * (l->n - pos) * nsort);
	l->rows[pos] = mt;
	if (vals != NULL)
	{
		memcpy(&l->vals[pos * nsort], vals, sizeof(Datum) * nsort);
		memcpy(&l->nulls[pos * nsort], nulls, sizeof(bool) * nsort);
	}
	else
		read_sort_values(wr, mt, &l->vals[pos * nsort], &l->nulls[pos * nsort]);
	l->n++;
}

static void
list_drop_last(RankList *l)
{
	Assert(l->n > 0);
	pfree(l->rows[--l->n]);
}

static void
rank_list_free(RankList *l)
{
	while (l->n > 0)
		list_drop_last(l);
	if (l->rows != NULL)
	{
		pfree(l->rows);
		pfree(l->vals);
		pfree(l->nulls);
	}
	memset(l, 0, sizeof(RankList));
}

/*
 * The row (its sort columns in wr->rowvals) into the list, if it is among
 * the first N: after the rows equal to it.  True if it was kept.
 */
static bool
list_offer(WinRankOp *wr, RankList *l, TupleTableSlot *row, MinimalTuple *copy)
{
	int			nsort = wr->nsort;
	int			lo = 0;
	int			hi = l->n;

	if (l->n == wr->limit &&
		compare(wr, wr->rowvals, wr->rownulls, &l->vals[(l->n - 1) * nsort],
				&l->nulls[(l->n - 1) * nsort]) >= 0)
		return false;
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (compare(wr, wr->rowvals, wr->rownulls, &l->vals[mid * nsort],
					&l->nulls[mid * nsort]) < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (l->n == wr->limit)
		list_drop_last(l);
	/* a copy per window: lists are freed one by one */
	if (*copy == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(keyed_state_context(wr->base.state));

		*copy = ExecCopySlotMinimalTuple(row);
		MemoryContextSwitchTo(old);
	}
	else
	{
		MinimalTuple again = MemoryContextAlloc(keyed_state_context(wr->base.state),
												(*copy)->t_len);

		memcpy(again, *copy, (*copy)->t_len);
		*copy = again;
	}
	list_insert(wr, l, lo, *copy, wr->byval ? wr->rowvals : NULL, wr->rownulls);
	return true;
}

/* -- rows -- */

static RankList *
window_list(WinRankOp *wr, StateRecord *rec, PtfTime end, const uint64 *prefetched)
{
	bool		created;
	RankList   *l = keyed_state_ns_get_prefetched(wr->base.state, rec, SPACE_WINDOWS, end,
												 prefetched, &created);

	if (created)
		timer_register(wr->base.timers, PTF_EVENT_TIME, end - MS, rec, end, TIMER_WINDOW);
	return l;
}

static PtfRowResult
window_rank_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	WinRankOp  *wr = (WinRankOp *) op;
	KeyedState *ks = op->state;
	StateRef	ref;
	MinimalTuple copy = NULL;
	int			n;
	int			i;
	int			k;

	/* rows of the TVFs are inserts: a stream's other changes pass over */
	if (kind != ROWKIND_INSERT)
	{
		wr->skipped++;
		return PTF_ROW_DONE;
	}
	if (wr->global)
	{
		/* the one window, fired by the end of input's watermark (+infinity) */
		wr->ends[0] = PTF_TIME_MAX;
		n = 1;
	}
	else
		n = window_assign(&wr->spec, ctx->event_time, wr->ends, wr->maxends);
	if (n > wr->maxends)
	{
		wr->maxends = n;
		wr->ends = repalloc(wr->ends, sizeof(PtfTime) * n);
		(void) window_assign(&wr->spec, ctx->event_time, wr->ends, wr->maxends);
	}
	if (n == 0)
	{
		wr->skipped++;			/* no window holds it: the TVF skips it */
		return PTF_ROW_DONE;
	}
	if (fired(wr->ends[n - 1], ctx->watermark))
		return PTF_ROW_LATE;

	switch (keyed_state_lookup_prefetched(ks, ctx->keys, row, ctx->proc_time, true,
										  ctx->prefetched, &ref))
	{
		case KS_FULL:
			return PTF_ROW_SPILL;
		case KS_CREATED:
			keyed_state_mark_changed(ks, ref.rec);
			break;
		case KS_FOUND:
			break;
		case KS_ABSENT:
			Assert(false);
			break;
	}
	for (k = 0; k < wr->nsort; k++)
		wr->rowvals[k] = slot_getattr(row, wr->sort_attnos[k], &wr->rownulls[k]);
	for (i = 0; i < n; i++)
	{
		RankList   *l;

		if (fired(wr->ends[i], ctx->watermark))
			continue;			/* counts in the windows not fired yet */
		l = window_list(wr, ref.rec, wr->ends[i], ctx->prefetched);
		if (list_offer(wr, l, row, &copy))
			keyed_state_ns_mark_changed(ks, ref.rec, SPACE_WINDOWS, wr->ends[i]);
	}
	return PTF_ROW_DONE;
}

/* -- firing -- */

static void
emit_list(WinRankOp *wr, RankList *l, PtfTime end)
{
	TupleTableSlot *out = wr->out;
	PtfTime		start = wr->global ? PTF_TIME_MIN : window_start_of(&wr->spec, end);
	int			natts = wr->outdesc->natts;
	MemoryContext old = MemoryContextSwitchTo(wr->firecxt);
	int			i;
	int			c;

	for (i = 0; i < l->n; i++)
	{
		/* the kept row, read: its values point into it, kept until the list goes */
		ExecStoreMinimalTuple(l->rows[i], wr->scratch, false);
		slot_getallattrs(wr->scratch);
		ExecClearTuple(out);
		for (c = 0; c < natts; c++)
		{
			Oid			type = TupleDescAttr(wr->outdesc, c)->atttypid;

			out->tts_isnull[c] = false;
			switch (wr->out_cols[c])
			{
				case RCOL_DATA:
					out->tts_values[c] =
						HeapTupleGetDatum(heap_form_tuple(wr->rowdesc, wr->scratch->tts_values,
														  wr->scratch->tts_isnull));
					break;
				case RCOL_COLUMN:
					out->tts_values[c] = wr->scratch->tts_values[wr->out_attnos[c] - 1];
					out->tts_isnull[c] = wr->scratch->tts_isnull[wr->out_attnos[c] - 1];
					break;
				case RCOL_START:
					out->tts_values[c] = ptf_time_to_datum_as(start, wr->time_type, type, &wr->gap_warned);
					break;
				case RCOL_END:
					out->tts_values[c] = ptf_time_to_datum_as(end, wr->time_type, type, &wr->gap_warned);
					break;
				case RCOL_TIME:
					out->tts_values[c] = ptf_time_to_datum_as(end - MS, wr->time_type, type, &wr->gap_warned);
					break;
				case RCOL_ROWNUM:
					out->tts_values[c] = Int64GetDatum((int64) i + 1);
					break;
				case RCOL_NULL:
					out->tts_isnull[c] = true;
					break;
			}
		}
		ExecStoreVirtualTuple(out);
		ptf_operator_emit(&wr->base, ROWKIND_INSERT, out);
		ExecClearTuple(wr->scratch);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(wr->firecxt);
}

static void
window_rank_on_timer(PtfOperator *op, const PtfTimer *timer, PtfTime watermark,
					 PtfTime proc_time)
{
	WinRankOp  *wr = (WinRankOp *) op;
	KeyedState *ks = op->state;
	RankList   *l;

	if (timer->rec->flags & RECORD_REMOVED)
		return;
	l = keyed_state_ns_find(ks, timer->rec, SPACE_WINDOWS, timer->ns);
	if (l == NULL)
		return;
	emit_list(wr, l, timer->ns);
	rank_list_free(l);
	keyed_state_ns_remove(ks, timer->rec, SPACE_WINDOWS, timer->ns);
	if (keyed_state_ns_count(ks, timer->rec, SPACE_WINDOWS) == 0)
		keyed_state_remove(ks, timer->rec);
	else
		keyed_state_mark_changed(ks, timer->rec);
}

/* -- durable state -- */

static void
window_rank_save(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
				 Datum *values, bool *nulls)
{
	RankList   *l;
	StateImages *imgs;

	if (space == STATE_KEY_SPACE)
		return;					/* a key is its windows */
	Assert(space == SPACE_WINDOWS);
	l = (RankList *) ns_value;
	imgs = palloc(sizeof(StateImages));
	imgs->n = l->n;
	imgs->tuples = l->rows;
	values[FIELD_ROWS] = PointerGetDatum(imgs);
	nulls[FIELD_ROWS] = false;
	values[FIELD_FIRES_AT] = Int64GetDatum(ns - MS);
	nulls[FIELD_FIRES_AT] = false;
}

static void
window_rank_restore(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
					Datum *values, bool *nulls)
{
	WinRankOp  *wr = (WinRankOp *) arg;
	RankList   *l;
	StateImages *imgs;
	int			i;

	if (space == STATE_KEY_SPACE)
		return;
	l = (RankList *) ns_value;
	memset(l, 0, sizeof(RankList));
	imgs = (StateImages *) DatumGetPointer(values[FIELD_ROWS]);
	for (i = 0; i < imgs->n && i < wr->limit; i++)
	{
		MinimalTuple mt = MemoryContextAlloc(keyed_state_context(wr->base.state),
											 imgs->tuples[i]->t_len);

		memcpy(mt, imgs->tuples[i], imgs->tuples[i]->t_len);
		list_insert(wr, l, l->n, mt, NULL, NULL);
	}
	timer_register(wr->base.timers, PTF_EVENT_TIME, ns - MS, ref->rec, ns, TIMER_WINDOW);
}

/* the word of a row's prefetch scratch holding its first window's end */
#define PREFETCH_WINDOW	KEYED_PREFETCH_WORDS

/*
 * A batch of rows asks for their keys' records and the list of their first
 * window (keyed_state_prefetch_stage), then for the list's sort values, the
 * first thing a row is compared with, before the first of them is
 * processed: rows of many keys in no order otherwise wait for each of those
 * cache misses in turn.  Rows of several windows (HOP, CUMULATE) prefetch
 * their first window's only.
 */
static void
window_rank_prefetch(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx,
					 int stage, uint64 *scratch)
{
	WinRankOp  *wr = (WinRankOp *) op;
	PtfTime		end = PTF_TIME_MIN;

	/* the row's first window's end, found once: PTF_TIME_MIN for none */
	Assert(stage == 0);
	if (wr->global)
		end = PTF_TIME_MAX;
	else if (window_assign(&wr->spec, ctx->event_time, &end, 1) == 0)
		end = PTF_TIME_MIN;
	scratch[PREFETCH_WINDOW] = (uint64) end;
	keyed_state_prefetch_stage(op->state, ctx->keys, row, stage,
							   end == PTF_TIME_MIN ? -1 : SPACE_WINDOWS, end, scratch);
}

/* the last entry of a window's list, which a row is compared with first */
static void
rank_list_ask(void *arg, void *value)
{
	WinRankOp  *wr = (WinRankOp *) arg;
	RankList   *l = (RankList *) value;

	if (l->n > 0)
	{
		__builtin_prefetch(&l->vals[(l->n - 1) * wr->nsort]);
		__builtin_prefetch(&l->nulls[(l->n - 1) * wr->nsort]);
	}
}

static void
window_rank_prefetch_batch(PtfOperator *op, int stage, uint64 *const *scratch, int n)
{
	StaticAssertStmt(KEYED_PREFETCH_NO_NS == PTF_TIME_MIN, "no window is no namespace");
	if (stage < KEYED_PREFETCH_STAGES)
		keyed_state_prefetch_batch(op->state, stage, SPACE_WINDOWS, PREFETCH_WINDOW, scratch, n);
	else
		keyed_state_prefetch_batch_values(op->state, SPACE_WINDOWS, PREFETCH_WINDOW, scratch, n,
										  rank_list_ask, op);
}

static const PtfOperatorMethods window_rank_methods = {
	.name = "window top-n",
	.on_row = window_rank_on_row,
	.prefetch = window_rank_prefetch,
	.prefetch_batch = window_rank_prefetch_batch,
	.prefetch_stages = KEYED_PREFETCH_STAGES + 1,
	.on_timer = window_rank_on_timer,
};

PtfOperator *
window_rank_create(const WindowRankOptions *opts, const PtfOperatorEnv *env)
{
	WinRankOp  *wr = (WinRankOp *) ptf_operator_alloc(sizeof(WinRankOp), &window_rank_methods, env);
	MemoryContext old = MemoryContextSwitchTo(wr->base.cxt);
	KeyedStateSpec ks;
	int			natts = opts->outdesc->natts;
	int			k;

	Assert(opts->limit > 0 && (opts->global || opts->spec.kind != WINDOW_SESSION));
	wr->spec = opts->spec;
	wr->global = opts->global;
	wr->time_type = opts->time_type;
	wr->rowdesc = CreateTupleDescCopy(opts->rowdesc);
	wr->limit = opts->limit;
	wr->nsort = opts->nsort;
	wr->sort_attnos = palloc(sizeof(AttrNumber) * Max(opts->nsort, 1));
	wr->ssup = palloc0(sizeof(SortSupportData) * Max(opts->nsort, 1));
	wr->byval = true;
	for (k = 0; k < opts->nsort; k++)
	{
		wr->byval &= TupleDescAttr(opts->rowdesc, opts->sort_attnos[k] - 1)->attbyval;
		wr->sort_attnos[k] = opts->sort_attnos[k];
		wr->ssup[k].ssup_cxt = wr->base.cxt;
		wr->ssup[k].ssup_collation = opts->sort_colls[k];
		wr->ssup[k].ssup_nulls_first = opts->sort_nulls_first[k];
		wr->ssup[k].ssup_attno = opts->sort_attnos[k];
		PrepareSortSupportFromOrderingOp(opts->sort_ops[k], &wr->ssup[k]);
	}
	wr->maxends = 16;
	wr->ends = palloc(sizeof(PtfTime) * wr->maxends);
	wr->rowvals = palloc(sizeof(Datum) * Max(opts->nsort, 1));
	wr->rownulls = palloc(sizeof(bool) * Max(opts->nsort, 1));
	wr->scratch = MakeSingleTupleTableSlot(wr->rowdesc, &TTSOpsMinimalTuple);
	wr->firecxt = AllocSetContextCreate(wr->base.cxt, "ptf window top-n output",
										ALLOCSET_DEFAULT_SIZES);

	memset(&ks, 0, sizeof(ks));
	ks.keys = opts->keys;
	ks.nspaces = WINDOW_RANK_NSPACES;
	ks.ns_value_size[SPACE_WINDOWS] = sizeof(RankList);
	ks.mem_limit = env->mem_limit;
	/* timers point at records; keys go when their windows have fired */
	ks.flags = KEYED_STATE_STABLE | KEYED_STATE_REMOVABLE |
		(env->durable ? KEYED_STATE_DURABLE : 0);
	wr->base.state = keyed_state_create(&ks, wr->base.cxt);
	wr->base.codec.layout = &window_rank_layout;
	wr->base.codec.arg = wr;
	wr->base.codec.save = window_rank_save;
	wr->base.codec.restore = window_rank_restore;

	/* a pipeline worker keeps the operator beyond the call's memory */
	wr->outdesc = CreateTupleDescCopy(opts->outdesc);
	wr->out = MakeSingleTupleTableSlot(wr->outdesc, &TTSOpsVirtual);
	wr->out_cols = palloc(sizeof(RankColumn) * Max(natts, 1));
	memcpy(wr->out_cols, opts->out_cols, sizeof(RankColumn) * natts);
	wr->out_attnos = palloc0(sizeof(AttrNumber) * Max(natts, 1));
	if (opts->out_attnos != NULL)
		memcpy(wr->out_attnos, opts->out_attnos, sizeof(AttrNumber) * natts);
	MemoryContextSwitchTo(old);
	return &wr->base;
}

uint64
window_rank_skipped(PtfOperator *op)
{
	return ((WinRankOp *) op)->skipped;
}

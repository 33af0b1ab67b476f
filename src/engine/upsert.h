/*-------------------------------------------------------------------------
 *
 * upsert.h
 *	  An upsert source read as a retract stream: Flink's ChangelogNormalize
 *	  run ahead of a call's operator (upsert.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ENGINE_UPSERT_H
#define PTF_ENGINE_UPSERT_H

#include "engine/call.h"
#include "engine/state_load.h"
#include "state/durable.h"

typedef struct PtfUpsert PtfUpsert;

/*
 * The images state of the uid of ds (in->upsert_keys set, a change
 * stream): its table opened under the uid's lock, after ds.
 */
extern PtfUpsert *ptf_upsert_open(PtfCall *call, PtfCallInput *in, DurableState *ds);
extern DurableState *ptf_upsert_state(PtfUpsert *u);

/* A fresh normalizer over empty durable state, in cxt. */
extern PtfOperator *ptf_upsert_build(PtfUpsert *u, MemoryContext cxt);

/*
 * Use op (fresh, or kept from a pipeline's last step: complete if it
 * holds every key): its state read as the main state is.
 */
extern void ptf_upsert_begin(PtfUpsert *u, PtfOperator *op, bool kept, bool complete);

/*
 * Once the main frame has its inputs: its own frame made, and the input's
 * rows sent through it -- the input's adapter -- into the input's handle.
 */
extern void ptf_upsert_start(PtfUpsert *u);

/* The end of the call's input: every row it holds goes on, its frame ends. */
extern void ptf_upsert_finish(PtfUpsert *u);

/* Rows it read this call; rows it passed over so far (op's life). */
extern uint64 ptf_upsert_rows_in(PtfUpsert *u);
extern uint64 ptf_upsert_skipped(PtfUpsert *u);

extern PtfStateLoad *ptf_upsert_load(PtfUpsert *u);
extern PtfOperator *ptf_upsert_operator(PtfUpsert *u);

#endif							/* PTF_ENGINE_UPSERT_H */

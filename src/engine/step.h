/*-------------------------------------------------------------------------
 *
 * step.h
 *	  The one channel between whoever runs a step of a stream -- a
 *	  pipeline worker, or ptf.create_pipeline making a pipeline's stream --
 *	  and the call that runs in it, across the SQL in between.
 *
 * A pipeline step runs the pipeline's query through SPI: the call of our
 * function it reaches cannot be handed arguments by the worker, nor hand
 * anything back but rows.  So the worker fills a PtfStep with what the
 * call may use (what the worker keeps between steps), installs it for the
 * step's statement, and reads what the call filled in (when to wake, how
 * far the stream was read) once the statement is done.  Nothing else
 * crosses: a call outside a step sees no step context and keeps nothing.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ENGINE_STEP_H
#define PTF_ENGINE_STEP_H

#include "base/base.h"
#include "base/kept.h"
#include "input/change_stream.h"

typedef struct PtfStep
{
	/* given by the runner */
	bool		in_worker;		/* a pipeline worker's step: its uid is its own */
	bool		start_only;		/* only make the uid's slot (create_pipeline) */
	PtfKeptSet *kept;			/* what the worker keeps between steps, or NULL */

	/* filled by the call (ptf_call_run) */
	bool		called;			/* a call with a uid ran in the step (or runs) */
	PtfTime		wake_at;		/* it has more to do then without new input; 0: no */
	ChangeStreamReport report;	/* how far its stream was read */
} PtfStep;

/*
 * Install step for the statement the runner is about to run; returns the
 * context installed before (to give back to ptf_step_end, also on error).
 */
extern PtfStep *ptf_step_begin(PtfStep *step);
extern void ptf_step_end(PtfStep *previous);

/* The step context installed, or NULL: a plain call. */
extern PtfStep *ptf_step_current(void);

#endif							/* PTF_ENGINE_STEP_H */

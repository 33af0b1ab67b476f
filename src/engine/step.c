/*-------------------------------------------------------------------------
 *
 * step.c
 *	  The step context installed around a pipeline step's statement
 *	  (see step.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/step.h"

static PtfStep *current_step = NULL;

PtfStep *
ptf_step_begin(PtfStep *step)
{
	PtfStep    *previous = current_step;

	step->called = false;
	step->wake_at = 0;
	memset(&step->report, 0, sizeof(step->report));
	step->report.reached_end = true;
	current_step = step;
	return previous;
}

void
ptf_step_end(PtfStep *previous)
{
	current_step = previous;
}

PtfStep *
ptf_step_current(void)
{
	return current_step;
}

/*-------------------------------------------------------------------------
 *
 * ptf.c
 *	  Entry point of the library: _PG_init, which has every module define
 *	  its own settings (next to their variables) and, when preloaded, the
 *	  pipeline workers' shared memory and launcher.
 *
 * The library is meant to be in shared_preload_libraries (pipelines need
 * shared memory and a background worker), but the table functions work
 * from a plain CREATE EXTENSION too; what needs preloading says so.
 * Nothing includes a header of this room: it only wires the others.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "base/ptf_time.h"
#include "citus/citus.h"
#include "functions/common.h"
#include "functions/row_number.h"
#include "functions/windows.h"
#include "commands/drops.h"
#include "engine/state_load.h"
#include "input/change_stream.h"
#include "planner/planner.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	ptf_time_define_gucs();
	ptf_common_define_gucs();
	change_stream_define_gucs();
	stream_slot_define_gucs();
	ptf_worker_init();
	ptf_planner_init(ptf_window_run_planned, ptf_first_rows_run_planned);
	ptf_state_load_init();
	ptf_drops_init();
	ptf_citus_init();
	MarkGUCPrefixReserved("ptf");
}

/*-------------------------------------------------------------------------
 *
 * common.h
 *	  Argument handling shared by the SQL-callable table functions: the
 *	  typed-NULL input, key and time column names, intervals, the output
 *	  tuplestore.  Everything here runs before any input row is read.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_COMMON_H
#define PTF_FUNCTIONS_COMMON_H

#include "fmgr.h"
#include "funcapi.h"

#include "frame.h"
#include "input/input.h"
#include "state/key.h"

/* ptf.state_ttl: the state_ttl of calls without one, 0 = keep forever */
extern int64 ptf_state_ttl_us;
extern void ptf_common_define_gucs(void);


/* input => NULL::tbl: the row type, and its relation when it has one */
extern void ptf_input_arg(FunctionCallInfo fcinfo, int argno, const char *name,
						  PtfInputArg *in);
/* the same for a row type known already (a planned query's table) */
extern void ptf_input_of_type(Oid rowtype, PtfInputArg *in);
/* an argument that gives only a row type (NULL::tbl) must be NULL */
extern void ptf_type_only_arg(FunctionCallInfo fcinfo, int argno, const char *name);

/*
 * Errors out, naming the call's uid and the way out, if a row type given
 * as an argument (NULL::t) no longer exists.
 */
extern void ptf_check_row_type_exists(FunctionCallInfo fcinfo, Oid type);

/* NULL is an error for arguments that need a value (22004) */
extern bool ptf_bool_arg(FunctionCallInfo fcinfo, int argno, const char *name);
/* snapshot => ...: only with a change stream (changes, uid) */
extern bool ptf_snapshot_arg(FunctionCallInfo fcinfo, int argno, bool changes, const char *uid);
extern char *ptf_text_arg(FunctionCallInfo fcinfo, int argno);	/* NULL ok */

/* partition_by: NULL or '{}' is one global partition */
extern KeySpec *ptf_keys_arg(FunctionCallInfo fcinfo, int argno,
							 TupleDesc rowdesc, const char *name);

/* a column that must hold time (timestamp, timestamptz, bigint epoch ms) */
extern AttrNumber ptf_time_column_arg(FunctionCallInfo fcinfo, int argno,
									  TupleDesc rowdesc, const char *name,
									  Oid *typid);

/* state_ttl: NULL means the ptf.state_ttl GUC; negative is an error */
extern int64 ptf_state_ttl_arg(FunctionCallInfo fcinfo, int argno);

/* an interval argument in microseconds, -1 when NULL */
extern int64 ptf_interval_arg(FunctionCallInfo fcinfo, int argno,
							  const char *name);

/* uid: NULL for none; empty is an error */
extern char *ptf_uid_arg(FunctionCallInfo fcinfo, int argno);

/*
 * Which input: the relation, a query, or the relation's change stream
 * (which needs a uid and a plain table).  Errors before anything is read.
 */
extern void ptf_check_input_choice(const PtfInputArg *in, const char *query,
								   bool changes, const char *uid);

/*
 * A user's SQL text parsed apart from the statement that passed it (a
 * condition, a select list of aggregates, an ORDER BY list): between push
 * and pop, an error's position is one within that text, shown as the
 * internal query -- as PL/pgSQL shows an expression's -- not a position in
 * the caller's statement, which it does not point into.
 */
typedef struct PtfParsedText
{
	ErrorContextCallback callback;
} PtfParsedText;

extern void ptf_parsed_text_push(PtfParsedText *pt, const char *text);
extern void ptf_parsed_text_pop(PtfParsedText *pt);

/*
 * The key of a table's rows: its replica identity index, or under
 * REPLICA IDENTITY FULL its primary key; NULL when it logs none.
 * *replident: the table's replica identity.
 */
extern KeySpec *ptf_replica_identity_keys(Oid relid, TupleDesc rowdesc, char *replident);

/*
 * Another room may refuse changes => true over some tables (src/citus/: a
 * Citus table's changes are in its shards, on other nodes).
 */
typedef void (*ptf_stream_table_hook_type) (Oid relid);
extern ptf_stream_table_hook_type ptf_stream_table_hook;

/*
 * An input's watermark: delay as given (>= 0), else the one declared on
 * the table (ptf.set_watermark), else none -- but a stream (uid) needs
 * one, and without a delay it is max(event time).
 */
extern void ptf_input_watermark(PtfFrameInputSpec *frame, Oid relid, const char *on_time,
								int64 delay, bool stream);

/* a parallel call's partial results pay, by the statistics of relid's keys */
extern bool ptf_partials_pay(Oid relid, KeySpec *keys, double per_key, double min_fold);
/* relid's keys are many enough to split a call by key */
extern bool ptf_keys_fill_shares(Oid relid, KeySpec *keys);

#endif							/* PTF_FUNCTIONS_COMMON_H */

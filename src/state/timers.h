/*-------------------------------------------------------------------------
 *
 * timers.h
 *	  Timers of an operator: event-time timers, fired as the watermark
 *	  passes them, and processing-time timers, fired as processing time (the
 *	  clock, or the proc_time column) passes them -- Flink's timer service.
 *
 * An operator registers a timer for a key (its record, which never moves)
 * and a namespace, with a tag saying what it is for; the frame pops the
 * timers that are due, in (time, registration) order, and hands each to
 * the operator.  Timers are not deleted: a timer that no longer means
 * anything (its candidate was replaced, its key removed) is recognized by
 * the operator when it fires, and ignored.
 *
 * Timers live as long as the operator that registered them.  Durable
 * operators re-register their timers from their stored values when state
 * is loaded (a pending candidate, a slice, a buffered row, a cleanup
 * deadline all say when they are due), so timers fire the same way within
 * a call, in a spilled partition's replay and across the calls of a uid.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_TIMERS_H
#define PTF_TIMERS_H

#include "base/base.h"
#include "state/keyed_state.h"

typedef struct PtfTimer
{
	PtfTime		time;
	uint64		seq;			/* ties: registration order */
	StateRecord *rec;			/* the key; NULL for none */
	int64		ns;				/* the namespace within the key */
	int32		tag;			/* what the operator registered it for */
} PtfTimer;

typedef enum PtfTimeDomain
{
	PTF_EVENT_TIME,
	PTF_PROCESSING_TIME
} PtfTimeDomain;

typedef struct TimerService TimerService;

extern TimerService *timer_service_create(MemoryContext cxt);

/* seq orders timers of one time: registration order, unless given */
extern void timer_register(TimerService *ts, PtfTimeDomain domain, PtfTime time,
						   StateRecord *rec, int64 ns, int32 tag);
extern void timer_register_seq(TimerService *ts, PtfTimeDomain domain, PtfTime time,
							   uint64 seq, StateRecord *rec, int64 ns, int32 tag);

/* Pop the first timer of domain due at upto (time <= upto); false if none. */
extern bool timer_pop_due(TimerService *ts, PtfTimeDomain domain, PtfTime upto,
						  PtfTimer *timer);

/* Forget the timers of removed records (before their memory is reused). */
extern void timer_forget_removed(TimerService *ts);

/* the time of the first timer of domain, PTF_TIME_MAX when none */
extern PtfTime timer_next_time(TimerService *ts, PtfTimeDomain domain);
extern uint64 timer_count(TimerService *ts, PtfTimeDomain domain);

#endif							/* PTF_TIMERS_H */

/*-------------------------------------------------------------------------
 *
 * old_key.h
 *	  An UPDATE's logged old key against its new row (old_key.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DECODING_OLD_KEY_H
#define PTF_DECODING_OLD_KEY_H

#include "access/htup.h"
#include "access/xlogdefs.h"
#include "utils/relcache.h"

/*
 * The new row of an UPDATE whose old key was logged (not REPLICA IDENTITY
 * FULL), its unchanged out-of-line key values taken from the old key, and
 * whether the key's values changed (else the old key is to be passed over).
 */
extern HeapTuple ptf_update_key_from_old(Relation rel, HeapTuple newtup, HeapTuple oldtup,
										 XLogRecPtr lsn, bool *key_changed);

#endif							/* PTF_DECODING_OLD_KEY_H */

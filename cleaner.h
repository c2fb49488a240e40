/*-------------------------------------------------------------------------
 *
 * cleaner.h
 *		Writing one shared buffer, and judging earlier writes.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_CLEANER_H
#define BGW_JIT_CLEANER_H

#include "access/xlogdefs.h"
#include "storage/buf_internals.h"

/* Outcome flags of bgw_jit_cleaner_sync_buffer() */
#define CLEANER_REUSABLE	0x01	/* unpinned and usage count 0 */
#define CLEANER_WRITTEN		0x02	/* this call wrote it */
#define CLEANER_EVICTED		0x04	/* an earlier write's page has left */
#define CLEANER_REDIRTIED	0x08	/* an earlier write's page is dirty again */
#define CLEANER_DEFERRED	0x10	/* not written: its WAL is not flushed */
#define CLEANER_CLAIMED		0x20	/* not written: for a writer process */

/* What neighbours written along with a page added up to */
typedef struct CleanerCombined
{
	int			written;
	int			evicted;		/* judgements of earlier writes, as above */
	int			redirtied;
} CleanerCombined;

/* A page put off until the WAL up to 'lsn' is flushed */
typedef struct CleanerDeferred
{
	BufferTag	tag;
	XLogRecPtr	lsn;			/* the page's LSN when it was put off */
} CleanerDeferred;

extern Size bgw_jit_cleaner_shmem_size(void);
extern void bgw_jit_cleaner_shmem_startup(void);
extern void bgw_jit_cleaner_clear_marks(void);
extern int	bgw_jit_cleaner_sync_buffer(int buf_id,
										WritebackContext *wb_context,
										bool any_usage, int combine_limit,
										CleanerCombined *combined,
										CleanerDeferred *deferred);
extern int	bgw_jit_cleaner_sync_deferred(int buf_id,
										  CleanerDeferred *deferred,
										  bool defer,
										  WritebackContext *wb_context);
extern int	bgw_jit_cleaner_claim(int buf_id, BufferTag *tag);
extern int	bgw_jit_cleaner_write_claimed(int buf_id, const BufferTag *tag,
										  WritebackContext *wb_context);

#endif							/* BGW_JIT_CLEANER_H */

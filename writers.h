/*-------------------------------------------------------------------------
 *
 * writers.h
 *		Writer processes that take pages from the cleaner when one
 *		synchronous writer cannot keep up.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_WRITERS_H
#define BGW_JIT_WRITERS_H

#include "storage/buf_internals.h"

/* Upper bound of bgw_jit.max_writers. */
#define BGW_JIT_WRITERS_MAX		8

/* What the writers did, cumulative since the server started. */
typedef struct WritersDone
{
	uint64		written;
	uint64		evicted;		/* judgements of earlier writes */
	uint64		redirtied;
	uint64		reported;		/* of 'written', those in pg_stat_io */
} WritersDone;

extern Size bgw_jit_writers_shmem_size(void);
extern void bgw_jit_writers_shmem_startup(void);
extern int	bgw_jit_writers_running(void);
extern bool bgw_jit_writers_push(int buf_id, const BufferTag *tag, int writers);
extern void bgw_jit_writers_done(WritersDone *done);

#endif							/* BGW_JIT_WRITERS_H */

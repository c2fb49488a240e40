/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Version-specific server calls, kept in one place.
 *
 * bgw_jit is built and tested against PostgreSQL 15 only.  A port to a
 * later release should need changes here and nowhere else: 16 renamed the
 * buffer tag's relation fields (RelFileLocator), 17 moved backend write
 * counts from pg_stat_bgwriter to pg_stat_io.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_COMPAT_H
#define BGW_JIT_COMPAT_H

#include "pgstat.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 160000
#error "bgw_jit supports PostgreSQL 15 only"
#endif

/*
 * Pin shared buffer 'buffer' if it still holds 'tag', without raising its
 * usage count (ReadRecentBuffer pins a first reference with
 * PinBuffer_Locked).  False if the buffer now holds another page.
 */
static inline bool
compat_pin_if_tag(const BufferTag *tag, Buffer buffer)
{
	return ReadRecentBuffer(tag->rnode, tag->forkNum, tag->blockNum, buffer);
}

/*
 * Buffer allocations counted by the built-in writer since its last reset
 * (pg_stat_bgwriter.buffers_alloc).  Fresh only when the caller runs with
 * stats_fetch_consistency = none, as the worker does.
 */
static inline uint64
compat_shared_buf_alloc(void)
{
	return (uint64) pgstat_fetch_stat_bgwriter()->buf_alloc;
}

/*
 * Data-file writes by processes other than the bgwriter and checkpointer
 * (pg_stat_bgwriter.buffers_backend), as far as the checkpointer has
 * absorbed them.  Honours the caller's stats_fetch_consistency.
 */
static inline uint64
compat_shared_backend_writes(void)
{
	return (uint64) pgstat_fetch_stat_checkpointer()->buf_written_backend;
}

#endif							/* BGW_JIT_COMPAT_H */

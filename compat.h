/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Version-specific server calls, kept in one place.
 *
 * bgw_jit is built and tested against PostgreSQL 15, 17, 18 and 19.  16 is
 * refused only because no Debian suite ships it to test against.  What
 * changed, and where the server's headers say so:
 *
 * 16	buffer tags hold a RelFileLocator (buf_internals.h:
 *		BufTagGetRelFileLocator); ScheduleBufferTagForWriteback takes an
 *		IOContext; pg_stat_io.
 * 17	smgrcloseall becomes smgrdestroyall (smgr.h); pg_stat_bgwriter loses
 *		buffers_backend (pgstat.h: PgStat_CheckpointerStats).
 * 18	PG_MODULE_MAGIC_EXT (fmgr.h).
 * 19	the buffer state word is 64 bits (buf_internals.h: pg_atomic_uint64
 *		state, UnlockBufHdr without a state argument, UnlockBufHdrExt);
 *		content locks are no longer LWLocks, and a buffer is written under a
 *		share-exclusive lock, which keeps hint-bit setters out while the page
 *		is checksummed in place (bufmgr.h: BUFFER_LOCK_SHARE_EXCLUSIVE,
 *		BufferBeginSetHintBits); ReadRecentBuffer raises the usage count;
 *		signal handlers get a pg_signal_info (c.h: SIGNAL_ARGS, port.h:
 *		PG_SIG_IGN).
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_COMPAT_H
#define BGW_JIT_COMPAT_H

#include "fmgr.h"
#include "pgstat.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/guc.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 200000
#error "bgw_jit supports PostgreSQL 15, 17, 18 and 19"
#elif PG_VERSION_NUM >= 160000 && PG_VERSION_NUM < 170000
#error "bgw_jit is not tested on PostgreSQL 16 (no Debian package to test against)"
#endif

/* 19's signal handlers take the sender's details: SIG_IGN needs a cast. */
#ifndef PG_SIG_IGN
#define PG_SIG_IGN SIG_IGN
#endif

/*
 * Memory for a GUC check hook's *extra: 16+ keeps GUC memory in its own
 * context and frees extra with guc_free(); before 16 it is free()d.
 */
#if PG_VERSION_NUM >= 160000
#define compat_guc_malloc(size) guc_malloc(LOG, (size))
#else
#define compat_guc_malloc(size) malloc(size)
#endif

/* The library's magic block; 18+ also records its name and version. */
#if PG_VERSION_NUM >= 180000
#define BGW_JIT_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "bgw_jit", .version = BGW_JIT_VERSION)
#else
#define BGW_JIT_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* A buffer's state word, as LockBufHdr returns it. */
#if PG_VERSION_NUM >= 190000
typedef uint64 CompatBufState;
#else
typedef uint32 CompatBufState;
#endif

/* The state word read without the header lock, for a first look. */
static inline CompatBufState
compat_read_buf_state(BufferDesc *desc)
{
#if PG_VERSION_NUM >= 190000
	return pg_atomic_read_u64(&desc->state);
#else
	return pg_atomic_read_u32(&desc->state);
#endif
}

/* Whether two buffer tags name the same page. */
static inline bool
compat_tags_equal(const BufferTag *a, const BufferTag *b)
{
#if PG_VERSION_NUM >= 160000
	return BufferTagsEqual(a, b);
#else
	return BUFFERTAGS_EQUAL(*a, *b);
#endif
}

/* Release the header lock taken by LockBufHdr, leaving the state as read. */
static inline void
compat_unlock_buf_hdr(BufferDesc *desc, CompatBufState state)
{
#if PG_VERSION_NUM >= 190000
	UnlockBufHdr(desc);
#else
	UnlockBufHdr(desc, state);
#endif
}

/*
 * The content lock to hold while FlushOneBuffer writes: a share lock
 * through 18; on 19 the page is checksummed in place, so hint-bit setters
 * must be kept out by the share-exclusive mode.
 */
#if PG_VERSION_NUM >= 190000
#define COMPAT_FLUSH_LOCK	BUFFER_LOCK_SHARE_EXCLUSIVE
#else
#define COMPAT_FLUSH_LOCK	BUFFER_LOCK_SHARE
#endif

/*
 * Pin shared buffer 'buffer' if it still holds 'tag', without raising its
 * usage count; 'seen' is its state as last read under the header lock.
 * False if the buffer now holds another page.  ReadRecentBuffer makes
 * room in the resource owner itself and, through 18, pins a first
 * reference with PinBuffer_Locked, which leaves the usage count alone.
 * 19's pins with PinBuffer(buf, NULL, true) instead, which raises a count
 * below BM_MAX_USAGE_COUNT by one (its compare-and-swap adds refcount and
 * usage count together): take that back under the header lock.  Whatever
 * backends did to the count meanwhile stays; the clock sweep does not
 * lower the count of a pinned buffer.
 */
static inline bool
compat_pin_if_tag(const BufferTag *tag, Buffer buffer, CompatBufState seen)
{
#if PG_VERSION_NUM >= 190000
	BufferDesc *desc = GetBufferDescriptor(buffer - 1);
	CompatBufState state;
	uint32		usage;

	if (!ReadRecentBuffer(BufTagGetRelFileLocator(tag),
						  BufTagGetForkNum(tag), tag->blockNum, buffer))
		return false;
	if (BUF_STATE_GET_USAGECOUNT(seen) >= BM_MAX_USAGE_COUNT)
		return true;
	state = LockBufHdr(desc);
	usage = BUF_STATE_GET_USAGECOUNT(state);
	if (usage > 0)
		UnlockBufHdrExt(desc, state, (usage - 1) * BUF_USAGECOUNT_ONE,
						BUF_USAGECOUNT_MASK, 0);
	else
		UnlockBufHdr(desc);
	return true;
#elif PG_VERSION_NUM >= 160000
	return ReadRecentBuffer(BufTagGetRelFileLocator(tag),
							BufTagGetForkNum(tag), tag->blockNum, buffer);
#else
	return ReadRecentBuffer(tag->rnode, tag->forkNum, tag->blockNum, buffer);
#endif
}

/* Ask for kernel writeback of a page just written, as the bgwriter does. */
static inline void
compat_schedule_writeback(WritebackContext *wb_context, BufferTag *tag)
{
#if PG_VERSION_NUM >= 160000
	ScheduleBufferTagForWriteback(wb_context, IOCONTEXT_NORMAL, tag);
#else
	ScheduleBufferTagForWriteback(wb_context, tag);
#endif
}

/*
 * Free the smgr objects of all relations (after a checkpoint, so that those
 * of dropped relations go); 17 renamed smgrcloseall.
 */
static inline void
compat_smgr_free_all(void)
{
#if PG_VERSION_NUM >= 170000
	smgrdestroyall();
#else
	smgrcloseall();
#endif
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
 * When pg_stat_bgwriter's statistics were last reset (its stats_reset);
 * fresh under the same condition as compat_shared_buf_alloc().
 */
static inline TimestampTz
compat_bgwriter_stats_reset(void)
{
	return pgstat_fetch_stat_bgwriter()->stat_reset_timestamp;
}

/*
 * Whether compat_backend_writes() includes the worker's own writes, which
 * the caller must then take away itself: only 15's buffers_backend does.
 */
#if PG_VERSION_NUM >= 160000
#define COMPAT_BACKEND_WRITES_INCLUDE_OWN false
#else
#define COMPAT_BACKEND_WRITES_INCLUDE_OWN true
#endif

/* compat.c */
extern void compat_report_stat(void);
extern uint64 compat_backend_writes(bool rebaseline);

#endif							/* BGW_JIT_COMPAT_H */

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
 *		buffers_backend, and its checkpoint columns move to
 *		pg_stat_checkpointer (pgstat.h: PgStat_CheckpointerStats).
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

#include <sys/resource.h>

#include "fmgr.h"
#include "pgstat.h"
#if PG_VERSION_NUM >= 180000
#include "storage/aio_subsys.h"
#endif
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/condition_variable.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/smgr.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

/*
 * Linux only: the worker measures its slice with CLOCK_THREAD_CPUTIME_ID,
 * and yields with sched_yield().
 */
#ifndef __linux__
#error "bgw_jit is built and tested on Linux only"
#endif

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
 * Pin shared buffer 'buffer' if it still holds 'tag', leaving its usage
 * count as it was; 'seen' is its state as last read under the header lock.
 * False if the buffer now holds another page.  ReadRecentBuffer makes
 * room in the resource owner itself and, through 18, pins a first
 * reference with PinBuffer_Locked, which leaves the usage count alone.
 *
 * 19 pins with PinBuffer(buf, NULL, true) instead, whose compare-and-swap
 * adds one to the refcount and, if the count it finds is below
 * BM_MAX_USAGE_COUNT, one to the usage count.  We take that one back with
 * a compare-and-swap of our own, as PinBuffer and the clock sweep change
 * the count: one step down from whatever the count is by then, so that
 * what backends added meanwhile stays.  (Not with UnlockBufHdrExt, as
 * before: it ORs in and masks out bits, so whether it writes the count we
 * ask for depends on the order it does the two in, which changed during
 * 19's development; its own comment warns it off usage counts.)
 *
 * Whether the pin raised the count cannot be seen, only inferred.  While
 * we hold the pin nothing lowers the count (the clock sweep skips pinned
 * buffers), so a count below the maximum now proves that the pin found
 * it below the maximum and raised it: taking one off is then exact.  A
 * count at the maximum now is ambiguous, and we judge by the count we saw
 * before the pin: below the maximum, the pin raised it; at the maximum,
 * the pin added nothing.  That is exact unless another process changed
 * the count between our look and the pin, a window of a few instructions
 * (longer only if the worker is descheduled there): a backend raising the
 * count to the maximum in it makes us take one of its raises back, and
 * the clock sweep lowering a count we saw at the maximum makes us leave
 * the pin's raise on.  Either way the count ends one step off, on a page
 * in active use.
 */
static inline bool
compat_pin_if_tag(const BufferTag *tag, Buffer buffer, CompatBufState seen)
{
#if PG_VERSION_NUM >= 190000
	BufferDesc *desc = GetBufferDescriptor(buffer - 1);
	bool		seen_below_max;
	uint64		state;

	seen_below_max = BUF_STATE_GET_USAGECOUNT(seen) < BM_MAX_USAGE_COUNT;

	if (!ReadRecentBuffer(BufTagGetRelFileLocator(tag),
						  BufTagGetForkNum(tag), tag->blockNum, buffer))
		return false;

	state = pg_atomic_read_u64(&desc->state);
	for (;;)
	{
		uint32		usage;

		/* As PinBuffer: no change to the state while the header is locked. */
		if (state & BM_LOCKED)
		{
			state = WaitBufHdrUnlocked(desc);
			continue;
		}
		usage = BUF_STATE_GET_USAGECOUNT(state);
		/* (0 cannot follow a raise: nothing to take back then either) */
		if (usage == 0 || (usage >= BM_MAX_USAGE_COUNT && !seen_below_max))
			break;
		if (pg_atomic_compare_exchange_u64(&desc->state, &state,
										   state - BUF_USAGECOUNT_ONE))
			break;
	}
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
 * Whether bgw_jit_compat_backend_writes() includes the worker's own
 * writes, which the caller must then take away itself: only 15's
 * buffers_backend does.
 */
#if PG_VERSION_NUM >= 160000
#define COMPAT_BACKEND_WRITES_INCLUDE_OWN false
#else
#define COMPAT_BACKEND_WRITES_INCLUDE_OWN true
#endif

/*
 * What an ERROR in the worker leaves to release, in the order core's writer
 * releases it: LWLocks (a content lock), then the buffer I/O in progress,
 * then pins.  On 15 the I/O is this process's InProgressBuf, unknown to
 * the resource owner, and AbortBufferIO() assumes the buffer still pinned:
 * after the pin is gone the buffer may hold another page whose I/O it
 * would end.  From 17 the resource owner tracks the I/O and ends it
 * before it releases the pins.  From 18, as core's writer does, any
 * asynchronous I/O handle the process still holds is released first.
 */
static inline void
compat_release_after_error(void)
{
	LWLockReleaseAll();
	ConditionVariableCancelSleep();
	pgstat_report_wait_end();
#if PG_VERSION_NUM >= 180000
	pgaio_error_cleanup();
#endif
#if PG_VERSION_NUM < 170000
	AbortBufferIO();
#endif
	UnlockBuffers();
	ReleaseAuxProcessResources(false);
	AtEOXact_Buffers(false);
	AtEOXact_SMgr();
	AtEOXact_Files(false);
	AtEOXact_HashTables(false);
}

/* This process's nice value; sets errno on failure. */
static inline int
compat_get_nice(void)
{
	return getpriority(PRIO_PROCESS, 0);
}

/*
 * Run this process at nice value 'nice_value'.  False, with errno set, if
 * the system refused (raising it needs CAP_SYS_NICE or RLIMIT_NICE).
 */
static inline bool
compat_set_nice(int nice_value)
{
	return setpriority(PRIO_PROCESS, 0, nice_value) == 0;
}

/*
 * Whether bgw_jit_compat_backend_writes() counts only writes of dirty
 * buffers (what a backend does when it evicts one): from 16, pg_stat_io's
 * writes; 15's buffers_backend also counts relation extensions, which no
 * cleaner can spare, and the worker's own writes.
 */
#define COMPAT_BACKEND_WRITES_ARE_EVICTIONS (PG_VERSION_NUM >= 160000)

/*
 * pg_stat_bgwriter's figures in one shape on every version: 15's columns
 * (bgw_jit_core_bgwriter(), new in 1.3).  From 17 the checkpoint columns
 * are pg_stat_checkpointer's (num_timed, num_requested, write_time,
 * sync_time, buffers_written) and the backends' two are gone
 * (has_backend false).  Times in milliseconds.
 */
typedef struct CompatBgwriterStats
{
	int64		checkpoints_timed;
	int64		checkpoints_req;
	double		checkpoint_write_time;
	double		checkpoint_sync_time;
	int64		buffers_checkpoint;
	int64		buffers_clean;
	int64		maxwritten_clean;
	bool		has_backend;	/* the next two exist (15, 16) */
	int64		buffers_backend;
	int64		buffers_backend_fsync;
	int64		buffers_alloc;
	TimestampTz stats_reset;	/* pg_stat_bgwriter's */
} CompatBgwriterStats;

/* compat.c */
extern void bgw_jit_compat_report_stat(uint64 (*writers_reported) (void));
extern uint64 bgw_jit_compat_backend_writes(bool rebaseline,
											uint64 (*writers_reported) (void),
											TimestampTz *read_at);
extern void bgw_jit_compat_bgwriter_stats(CompatBgwriterStats *out);
extern void bgw_jit_compat_join_procsignal(void);

#endif							/* BGW_JIT_COMPAT_H */

/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		bgw_jit's shared memory: the worker's published state, its
 *		cumulative counters and the history ring.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_SHMEM_H
#define BGW_JIT_SHMEM_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* One cycle of the worker, as kept in the history ring. */
typedef struct BgwJitCycle
{
	uint64		cycle;			/* cycle number since stats reset, from 1 */
	TimestampTz at;				/* when the cycle started */
	int64		elapsed_us;		/* since the previous cycle started */
	int			strategy;		/* BgwJitStrategy of the cycle */
	uint32		recent_alloc;	/* allocations credited to the cycle */
	int64		alloc_reported; /* increase of the shared counter seen */
	int64		strategy_delta; /* clock-hand movement since last cycle */
	float		smoothed_alloc;
	float		smoothed_density;
	int			upcoming_alloc_est;
	int			bufs_ahead;		/* cleaner's lead over the hand */
	int64		overrun;		/* how far the hand ran past the cleaner */
	float		surprise;		/* hand movement / movement planned for */
	/* double: replay starts from these and must take the same decisions */
	double		margin;			/* multiplier in force (auto or set) */
	double		hand_rate;		/* smoothed hand speed, buffers/s */
	int			lead_target;	/* lead the self-paced scan aimed for */
	int			sleep_ms;		/* sleep planned after the cycle */
	bool		woken;			/* the sleep before it ended early */
	int			scanned;
	int			written;
	int			all_written;	/* by the all-buffers scan (jit+all) */
	int			combined;		/* of both, neighbours written along */
	int			reusable_found; /* reusable buffers the scan found */
	int			evicted;		/* earlier writes whose page left its buffer */
	int			redirtied;		/* earlier writes whose page was dirty again */
	int			wal_deferred;	/* pages put off until their WAL is flushed */
	bool		lapped;			/* the hand had overtaken the cleaner */
	bool		hit_maxpages;
	bool		sliced;			/* its time slice ended with work left */
	bool		restarted;		/* the controller restarted before it */
	int64		cpu_us;			/* CPU time the cycle took */
	float		misses;			/* share of the demand missed (pacer.h) */
	float		write_rate;		/* the write budget's rate, pages/s */
	int64		backend_writes; /* backends' writes fed to the margin; -1 */
} BgwJitCycle;

/* Cumulative counters since stats_reset. */
typedef struct BgwJitCounters
{
	uint64		cycles;
	uint64		buf_clean;		/* buffers the LRU scan wrote */
	uint64		buf_all_clean;	/* buffers the all-buffers scan wrote */
	uint64		buf_combined;	/* of both, neighbours written along */
	uint64		buf_clean_evicted;	/* writes whose page later left */
	uint64		buf_clean_redirtied;	/* writes whose page was dirtied again */
	uint64		buf_alloc;		/* allocations credited to cycles */
	uint64		backend_writes; /* increase of pg_stat_bgwriter.buffers_backend */
	uint64		own_writes_absorbed;	/* our writes already in that increase */
	uint64		maxwritten_clean;
	uint64		laps;
	uint64		buffers_overrun;	/* buffers the hand passed uncleaned */
	uint64		hibernations;
	uint64		buffers_scanned;
	uint64		buffers_reusable;
	uint64		buf_wal_deferred;	/* pages put off until their WAL was flushed */
} BgwJitCounters;

/*
 * bgw_jit's share of pg_stat_bgwriter's statistics, for the bgw_jit_bgwriter
 * view.  pg_stat_bgwriter has its own periods, which start at
 * pg_stat_reset_shared('bgwriter') and are named by its stats_reset, so
 * none of this is touched by bgw_jit_reset().  The totals count for the
 * life of the statistics (kept across clean restarts, as core's are); the
 * period holds their values when the worker first saw the current
 * pg_stat_bgwriter.stats_reset, and the view shows the differences.
 */
typedef struct BgwJitBgwriterShare
{
	uint64		written;		/* all the worker's writes (both scans) */
	uint64		maxwritten;		/* cycles stopped by the page cap or budget */

	/*
	 * 15: 'written' as it was at the start of the last cycle that saw
	 * pg_stat_bgwriter.buffers_backend change, i.e. the worker's writes
	 * that buffers_backend has absorbed (see fold_bgwriter_share()).
	 */
	uint64		absorbed;
	uint64		backend_seen;	/* buffers_backend then */

	TimestampTz period_reset;	/* pg_stat_bgwriter.stats_reset; 0: none */
	uint64		period_written; /* the totals when the period was seen */
	uint64		period_maxwritten;
	uint64		period_absorbed;
} BgwJitBgwriterShare;

/* Everything in shared memory; 'lock' protects all other fields. */
typedef struct BgwJitShared
{
	LWLock	   *lock;
	BgwJitCounters counters;
	TimestampTz stats_reset;

	/*
	 * Bumped by every bgw_jit_reset().  The worker drops a cycle that a
	 * reset overtook, and clears the clean marks once per generation
	 * (marks_generation: the generation they were last cleared for).
	 */
	uint64		reset_generation;
	uint64		marks_generation;

	/*
	 * The buffers_backend value the worker last folded into counters;
	 * invalid after a reset until the worker reads a new baseline.
	 */
	bool		backend_seen_valid;
	uint64		backend_seen;
	TimestampTz backend_read_at;	/* when backend_seen was read; 0 then */

	/* the worker's share of pg_stat_bgwriter; bgw_jit_reset() leaves it */
	BgwJitBgwriterShare bgwriter;

	/* state as of the last cycle */
	int			strategy;
	int			pacing;			/* BgwJitPacing the worker runs with */
	int			strategy_buf_id;
	int			next_to_clean;
	int			bufs_ahead;
	float		smoothed_alloc;
	float		smoothed_density;
	int			upcoming_alloc_est;
	float		margin;
	float		hand_rate;
	int			lead_target;
	int			sleep_ms;		/* -1 while hibernating */
	int			cpu_priority;	/* BgwJitCpuPriority in effect */
	TimestampTz last_cycle_at;
	TimestampTz conf_load_time; /* when the worker last loaded its settings */

	/*
	 * The running worker's process id, 0 when none runs (bgw_jit_stats.pid,
	 * new in 1.3).  Set and cleared by the worker itself, without the lock
	 * (an aligned int is read whole).
	 */
	int			worker_pid;

	/*
	 * Set while the worker hibernates; a statement start wakes it.  Every
	 * statement start of every backend reads 'hibernating', while the
	 * fields before and after are written by the worker every cycle: so it
	 * and worker_latch (set at the worker's start, cleared at its exit)
	 * have a cache line to themselves, which the worker writes only around
	 * the sleeps it takes when idle.  The alignment holds in memory
	 * because ShmemInitStruct() returns memory aligned to
	 * PG_CACHE_LINE_SIZE (all supported versions), and
	 * offsetof(BgwJitShared, history), which sizes the struct in shared
	 * memory, counts the padding.
	 */
	pg_attribute_aligned(PG_CACHE_LINE_SIZE) pg_atomic_uint32 hibernating;
	Latch	   *worker_latch;

	/*
	 * The WAL flusher (flusher.c): the LSN the cleaner wants flushed
	 * (InvalidXLogRecPtr: none), and the flusher's latch and process id,
	 * NULL and 0 while none runs.  Written by the cleaner and the flusher
	 * only, on a cache line of their own.
	 */
	pg_attribute_aligned(PG_CACHE_LINE_SIZE) pg_atomic_uint64 flush_request;
	Latch	   *flusher_latch;
	int			flusher_pid;

	/*
	 * Ring of the last history_size cycles; history_count ever recorded.
	 * Aligned to start the cache line after the one above.
	 */
	pg_attribute_aligned(PG_CACHE_LINE_SIZE) int history_size;
	uint64		history_count;
	BgwJitCycle history[FLEXIBLE_ARRAY_MEMBER];
} BgwJitShared;

/*
 * What the worker hands to bgw_jit_publish_cycle() after each run: the
 * cycle's row and what it read at its start.
 */
typedef struct BgwJitCycleResult
{
	BgwJitCycle entry;
	uint64		generation;		/* reset generation the cycle ran in */
	bool		cleared_marks;	/* it cleared the marks for that generation */
	bool		cleaned;		/* the scan ran (enabled, maxpages != 0) */
	bool		continues;		/* a later slice of the cycle before */
	bool		hibernate;		/* idle long enough to sleep long */
	int			strategy_buf_id;
	int			next_to_clean;	/* the LRU scan's frontier after it */
	int			cpu_priority;	/* BgwJitCpuPriority in effect */
	TimestampTz bgwriter_reset; /* pg_stat_bgwriter.stats_reset at start */
	uint64		backend_writes; /* others' writes as read at the start */
	TimestampTz backend_read_at;	/* when they were read */
} BgwJitCycleResult;

extern BgwJitShared *bgw_jit_shared;

extern void bgw_jit_shmem_init(void);
extern void bgw_jit_check_loaded(void);
extern void bgw_jit_reset_counters(void);
extern int	bgw_jit_history_read(BgwJitShared *s, uint64 *next, uint64 end,
								 BgwJitCycle *out, int max);
extern void bgw_jit_clear_worker_pid(int code, Datum arg);
extern void bgw_jit_publish_cycle(BgwJitCycleResult *result);

#endif							/* BGW_JIT_SHMEM_H */

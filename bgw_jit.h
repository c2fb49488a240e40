/*-------------------------------------------------------------------------
 *
 * bgw_jit.h
 *		Shared declarations of the bgw_jit extension.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_H
#define BGW_JIT_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/buf_internals.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* Seconds the postmaster waits before restarting a worker that failed. */
#define BGW_JIT_RESTART_SECONDS 5

/*
 * Upper bound of bgw_jit.max_write_rate, in MB/s (100 GB/s, beyond any
 * disk).  Core prints a real setting's bounds, and a value refused for
 * being out of them, with %g, i.e. to 6 significant digits: a bound of
 * 1e6 or more reads as "1e+06", and the next value up as the bound
 * itself.  Keep it an integer below 1e6.
 */
#define BGW_JIT_MAX_WRITE_RATE_MAX	100000.0

/* Cleaning strategies (bgw_jit.strategy). */
typedef enum BgwJitStrategy
{
	BGW_JIT_STRATEGY_JIT,		/* just-in-time, as PostgreSQL 8.3+ */
	BGW_JIT_STRATEGY_LAP,		/* fixed share per cycle behind the hand */
	BGW_JIT_STRATEGY_JIT_ALL	/* jit plus 8.x's all-buffers scan */
} BgwJitStrategy;

/* Pacing (bgw_jit.pacing). */
typedef enum BgwJitPacing
{
	BGW_JIT_PACING_AUTO,		/* the worker chooses its sleep (pacer.c) */
	BGW_JIT_PACING_FIXED		/* a cycle every bgw_jit.delay, as core */
} BgwJitPacing;

/* CPU priority of the worker (bgw_jit.cpu_priority). */
typedef enum BgwJitCpuPriority
{
	BGW_JIT_CPU_PRIORITY_NORMAL,
	BGW_JIT_CPU_PRIORITY_LOW,	/* nice BGW_JIT_LOW_PRIORITY_NICE */
	BGW_JIT_CPU_PRIORITY_IDLE	/* SCHED_IDLE: refused since 1.3.1 */
} BgwJitCpuPriority;

#define BGW_JIT_LOW_PRIORITY_NICE	10

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

/* bgw_jit.c: settings */
extern bool bgw_jit_enabled;
extern int	bgw_jit_delay;
extern int	bgw_jit_lru_maxpages;
extern double bgw_jit_lru_multiplier;
extern int	bgw_jit_smoothing_samples;
extern int	bgw_jit_scan_whole_pool_seconds;
extern int	bgw_jit_history_size;
extern int	bgw_jit_strategy;
extern double bgw_jit_lru_percent;
extern double bgw_jit_all_percent;
extern int	bgw_jit_all_maxpages;
extern int	bgw_jit_flush_after;
extern int	bgw_jit_combine_limit;
extern int	bgw_jit_pacing;
extern double bgw_jit_max_write_rate;
extern int	bgw_jit_cpu_priority;
#ifdef BGW_JIT_FAULT_INJECTION
/* bgw_jit.inject_error (test builds) */
#define BGW_JIT_INJECT_OFF		0
#define BGW_JIT_INJECT_WRITE	1	/* with the buffer pinned and locked */
#define BGW_JIT_INJECT_DEFERRED	2	/* retrying a page put off */
#define BGW_JIT_INJECT_FLUSH	3	/* the WAL flusher, flushing */
extern int	bgw_jit_inject_error;
extern int	bgw_jit_error_log_interval;
extern int	bgw_jit_slice_us;
#define BGW_JIT_ERROR_LOG_INTERVAL	bgw_jit_error_log_interval
#define BGW_JIT_SLICE_US			bgw_jit_slice_us
#else
#define BGW_JIT_ERROR_LOG_INTERVAL	BGW_JIT_ERROR_LOG_INTERVAL_S
#define BGW_JIT_SLICE_US			(SCAN_SLICE_MS * 1000)
#endif

/* bgw_jit.c: shared state */
extern BgwJitShared *bgw_jit_shared;
extern uint32 *bgw_jit_clean_marks;
extern const char *bgw_jit_strategy_name(int strategy);
extern const char *bgw_jit_pacing_name(int pacing);
extern bool bgw_jit_parse_multiplier(const char *text, double *value);
extern const char *bgw_jit_cpu_priority_name(int priority);
extern void bgw_jit_check_loaded(void);
extern void bgw_jit_reset_counters(void);
extern int	bgw_jit_history_read(BgwJitShared *s, uint64 *next, uint64 end,
								 BgwJitCycle *out, int max);
extern void bgw_jit_clear_worker_pid(int code, Datum arg);

/* persist.c */
extern void bgw_jit_stats_load(BgwJitShared *s);
extern void bgw_jit_stats_save(int code, Datum arg);

/* cleaner.c: outcome flags of cleaner_sync_buffer() */
#define CLEANER_REUSABLE	0x01	/* unpinned and usage count 0 */
#define CLEANER_WRITTEN		0x02	/* this call wrote it */
#define CLEANER_EVICTED		0x04	/* an earlier write's page has left */
#define CLEANER_REDIRTIED	0x08	/* an earlier write's page is dirty again */
#define CLEANER_DEFERRED	0x10	/* put off until its WAL is flushed */

/* cleaner.c: what neighbours written along with a page added up to */
typedef struct CleanerCombined
{
	int			written;
	int			evicted;		/* judgements of earlier writes, as above */
	int			redirtied;
} CleanerCombined;

/* cleaner.c: a page put off until its WAL is flushed */
typedef struct CleanerDeferred
{
	BufferTag	tag;
	XLogRecPtr	lsn;			/* the page's LSN when it was put off */
} CleanerDeferred;

extern void cleaner_clear_marks(void);

extern int	cleaner_sync_buffer(int buf_id, WritebackContext *wb_context,
								bool any_usage, int combine_limit,
								CleanerCombined *combined,
								CleanerDeferred *deferred);
extern int	cleaner_sync_deferred(int buf_id, CleanerDeferred *deferred,
								  WritebackContext *wb_context);

/* worker.c */
extern PGDLLEXPORT void bgw_jit_main(Datum main_arg);
/*
 * How long a worker pauses after an ERROR before it carries on, and how
 * often it logs the same error (settable in test builds: error_log_interval).
 */
#define BGW_JIT_ERROR_SLEEP_MS	1000
#define BGW_JIT_ERROR_LOG_INTERVAL_S	60

extern void bgw_jit_worker_init(void);
extern void bgw_jit_error_cleanup(const char *what);
extern void bgw_jit_error_pause(void);

/* flusher.c */
extern PGDLLEXPORT void bgw_jit_flusher_main(Datum main_arg);
extern bool bgw_jit_request_wal_flush(XLogRecPtr lsn);
extern bool bgw_jit_wal_flush_pending(XLogRecPtr lsn);

#endif							/* BGW_JIT_H */

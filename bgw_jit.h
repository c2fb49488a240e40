/*-------------------------------------------------------------------------
 *
 * bgw_jit.h
 *		bgw_jit's settings, as bgw_jit.c defines them, and what every
 *		module shares.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_H
#define BGW_JIT_H

#include "portability/instr_time.h"

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
extern int	bgw_jit_max_writers;
#ifdef BGW_JIT_FAULT_INJECTION
/* bgw_jit.inject_error (test builds) */
#define BGW_JIT_INJECT_OFF		0
#define BGW_JIT_INJECT_WRITE	1	/* with the buffer pinned and locked */
#define BGW_JIT_INJECT_DEFERRED	2	/* retrying a page put off */
#define BGW_JIT_INJECT_FLUSH	3	/* the WAL flusher, flushing */
extern int	bgw_jit_inject_error;
extern int	bgw_jit_error_log_interval;	/* see errors.h */
extern int	bgw_jit_slice_us;	/* see scan.h */
extern int	bgw_jit_writers_min;	/* see worker.c */
#endif

extern const char *bgw_jit_strategy_name(int strategy);
extern const char *bgw_jit_pacing_name(int pacing);
extern bool bgw_jit_parse_multiplier(const char *text, double *value);
extern const char *bgw_jit_cpu_priority_name(int priority);

/* Milliseconds on the monotonic clock since 'start'. */
static inline double
bgw_jit_ms_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
}

#endif							/* BGW_JIT_H */

/*-------------------------------------------------------------------------
 *
 * scan.h
 *		The worker's scans over the buffer pool, bounded by a write budget
 *		and a time slice.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_SCAN_H
#define BGW_JIT_SCAN_H

#include "portability/instr_time.h"

#include "estimator.h"
#include "pacer.h"
#include "shmem.h"

/*
 * No slice of a cycle works longer than this, in CPU time: the worker
 * comes back to its latch and its interrupts within a few milliseconds
 * whatever the pool size, and the cycle goes on in another slice after a
 * sleep of SCAN_SLICE_SLEEP_MS.  A later slice continues its cycle: the
 * same estimate, plan and caps, not a new sample
 * (bgw_jit_scan_limit_start()).  A buffered page write costs microseconds
 * of CPU, so a slice holds
 * hundreds of writes, while an idle pass over a large pool is cut into
 * many.  CPU time, not wall time, so that a worker the scheduler preempts
 * does not also give up its work.  Test builds can shorten it
 * (bgw_jit.slice_us).
 */
#define SCAN_SLICE_MS		5.0
#define SCAN_SLICE_SLEEP_MS	1
#ifdef BGW_JIT_FAULT_INJECTION
#define BGW_JIT_SLICE_US	bgw_jit_slice_us
#else
#define BGW_JIT_SLICE_US	(SCAN_SLICE_MS * 1000)
#endif

/* Time and writes left to a cycle; both scans draw on it. */
typedef struct ScanLimit
{
	int64		start_cpu_us;	/* the thread's CPU time at the start */
	int64		yield_cpu_us;	/* its CPU time when it last yielded */
	double		slice_ms;
	int			pages;			/* writes the rate still allows */
	bool		continues;		/* a later slice of the cycle */
	bool		out_of_time;	/* the slice ended with work left */
} ScanLimit;

/*
 * What the LRU scan needs from the cycle; a later slice passes its cycle's
 * movement and allocations, as they were at the cycle's start.
 */
typedef struct ScanRequest
{
	int64		hand_position;	/* cumulative clock-hand movement, now */
	int64		strategy_delta; /* the cycle's movement since the one before */
	uint32		recent_alloc;	/* the cycle's allocations */
	const PacerPlan *plan;
	int			writers;		/* processes to write its pages (writers.c) */
} ScanRequest;

extern int64 bgw_jit_scan_thread_cpu_us(void);
extern void bgw_jit_scan_init(int *flush_after);
extern void bgw_jit_scan_reset_writeback(int *flush_after);
extern void bgw_jit_scan_limit_start(ScanLimit *limit, int pages,
									 bool continues);
extern void bgw_jit_scan_end_cycle(void);
extern void bgw_jit_scan_forget_frontier(void);
extern void bgw_jit_scan_lru(const ScanRequest *req, ScanLimit *limit,
							 BgwJitCycle *e);
extern void bgw_jit_scan_all(ScanLimit *limit, BgwJitCycle *e);
extern int64 bgw_jit_scan_overrun(int64 hand_position);
extern int	bgw_jit_scan_handed(void);
extern int	bgw_jit_scan_next_to_clean(void);
extern const JitState *bgw_jit_scan_estimates(void);

#endif							/* BGW_JIT_SCAN_H */

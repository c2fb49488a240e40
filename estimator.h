/*-------------------------------------------------------------------------
 *
 * estimator.h
 *		The just-in-time writer's arithmetic, free of buffer-manager calls.
 *
 * Everything here is a pure function of its inputs so that it can be
 * replayed from SQL (bgw_jit_replay) and tested with exact values.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_ESTIMATOR_H
#define BGW_JIT_ESTIMATOR_H

#include "c.h"

/*
 * A count from floating-point arithmetic: truncated, 0 for anything not
 * above 0 (NaN included), INT32_MAX beyond it.  Shared with pacer.c.
 */
static inline int
bgw_jit_clamp_to_int(double value)
{
	if (!(value > 0))
		return 0;
	if (value >= (double) PG_INT32_MAX)
		return PG_INT32_MAX;
	return (int) value;
}

/* Core's starting value for buffers scanned per reusable buffer found. */
#define JIT_INITIAL_DENSITY 10.0f

typedef struct JitParams
{
	double		multiplier;		/* bgw_jit.lru_multiplier */
	int			smoothing_samples;	/* bgw_jit.smoothing_samples, >= 1 */
	int			delay_ms;		/* bgw_jit.delay */
	int			scan_whole_pool_seconds;	/* bgw_jit.scan_whole_pool_seconds */
	int			nbuffers;		/* size of the pool */
} JitParams;

/* Moving averages carried from cycle to cycle. */
typedef struct JitState
{
	float		smoothed_alloc;
	float		smoothed_density;
} JitState;

/* What one cycle's estimate tells the scan to do. */
typedef struct JitEstimate
{
	int			reusable_buffers_est;	/* reusable buffers believed ahead */
	int			min_scan_buffers;	/* floor that laps the pool in time */
	int			upcoming_alloc_est; /* reusable buffers wanted ahead */
} JitEstimate;

extern void bgw_jit_estimator_init(JitState *state);
extern void bgw_jit_estimate(JitState *state, const JitParams *params,
							 uint32 recent_alloc, int64 strategy_delta,
							 int bufs_ahead, JitEstimate *est);
extern void bgw_jit_refine_density(JitState *state, const JitParams *params,
								   int64 scanned, int64 reusable_found);

/*
 * Non-destructive allocation counting (doc/internals.md, "Counting allocations").
 *
 * The shared pgstat counter is exact but lags; the clock hand is immediate
 * but, through 18, misses the allocations the freelist serves (19 has no
 * freelist: every allocation the counter counts moves the hand).  The
 * tracker credits each cycle with the hand's movement converted to
 * allocations by a ratio calibrated from the lagged counter, and pays back
 * the difference whenever a new counter value arrives, so that the
 * credited total follows the exact counter over time.
 */
typedef struct AllocTracker
{
	bool		valid;
	uint64		reported;		/* last value seen of the shared counter */
	uint64		hand_at_report; /* hand position when it was first seen */
	int64		credited;		/* allocations credited, in counter units */
	double		hand_per_alloc; /* calibrated hand movement per allocation */
} AllocTracker;

extern void bgw_jit_alloc_tracker_init(AllocTracker *tracker);
extern uint32 bgw_jit_alloc_tracker_step(AllocTracker *tracker,
										 uint64 reported, uint64 hand,
										 int64 *reported_delta);

#endif							/* BGW_JIT_ESTIMATOR_H */

/*-------------------------------------------------------------------------
 *
 * estimator.c
 *		The just-in-time writer's arithmetic, as in PostgreSQL 15's
 *		BgBufferSync(), with core's hard-coded constants made parameters.
 *
 * Single-precision floats on purpose: core uses float, and replaying a
 * cycle must give the same figures core would have computed.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "estimator.h"

/* Counter intervals shorter than this are too noisy to calibrate from. */
#define ALLOC_CALIBRATION_MIN	16
/* Weight of a new calibration sample in the hand-per-allocation average. */
#define ALLOC_CALIBRATION_WEIGHT	0.25

void
bgw_jit_estimator_init(JitState *state)
{
	state->smoothed_alloc = 0;
	state->smoothed_density = JIT_INITIAL_DENSITY;
}

/*
 * One cycle's estimate: update the moving averages from the allocations and
 * clock-hand movement since the previous cycle, then decide how many
 * reusable buffers should be found ahead of the strategy point.
 */
void
bgw_jit_estimate(JitState *state, const JitParams *params, uint32 recent_alloc,
				 int64 strategy_delta, int bufs_ahead, JitEstimate *est)
{
	float		samples = (float) params->smoothing_samples;
	float		scan_whole_pool_ms = params->scan_whole_pool_seconds * 1000.0f;
	int			upcoming;

	/* Buffers the hand passed per allocation; unchanged if it did not move. */
	if (strategy_delta > 0 && recent_alloc > 0)
	{
		float		scans_per_alloc = (float) strategy_delta / (float) recent_alloc;

		state->smoothed_density += (scans_per_alloc - state->smoothed_density) /
			samples;
	}

	est->reusable_buffers_est =
		bgw_jit_clamp_to_int((float) bufs_ahead / state->smoothed_density);

	/* Fast attack, slow decline. */
	if (state->smoothed_alloc <= (float) recent_alloc)
		state->smoothed_alloc = recent_alloc;
	else
		state->smoothed_alloc += ((float) recent_alloc - state->smoothed_alloc) /
			samples;

	upcoming = bgw_jit_clamp_to_int(state->smoothed_alloc * params->multiplier);

	/* Stop tracking ever-smaller values once they no longer matter. */
	if (upcoming == 0)
		state->smoothed_alloc = 0;

	/* Even when idle, make progress so the whole pool is visited in time. */
	est->min_scan_buffers =
		bgw_jit_clamp_to_int(params->nbuffers /
							 (scan_whole_pool_ms / params->delay_ms));

	if ((int64) upcoming < (int64) est->min_scan_buffers + est->reusable_buffers_est)
		upcoming = (int) Min((int64) est->min_scan_buffers +
							 est->reusable_buffers_est, PG_INT32_MAX);
	est->upcoming_alloc_est = upcoming;
}

/*
 * Treat the cleaner's own scan as one more sample of the density: it
 * scanned 'scanned' buffers and found 'reusable_found' reusable ones.
 */
void
bgw_jit_refine_density(JitState *state, const JitParams *params, int64 scanned,
					   int64 reusable_found)
{
	if (scanned > 0 && reusable_found > 0)
	{
		float		scans_per_alloc = (float) scanned / (float) reusable_found;

		state->smoothed_density += (scans_per_alloc - state->smoothed_density) /
			(float) params->smoothing_samples;
	}
}

void
bgw_jit_alloc_tracker_init(AllocTracker *tracker)
{
	memset(tracker, 0, sizeof(AllocTracker));
	tracker->hand_per_alloc = 1.0;
}

/*
 * Allocations to credit to this cycle, given the shared counter's current
 * value 'reported' and the clock hand's cumulative position 'hand'.
 * *reported_delta is set to how much the counter rose since the last call.
 */
uint32
bgw_jit_alloc_tracker_step(AllocTracker *tracker, uint64 reported, uint64 hand,
						   int64 *reported_delta)
{
	double		truth;
	double		owed;

	*reported_delta = 0;
	if (!tracker->valid)
	{
		tracker->valid = true;
		tracker->reported = reported;
		tracker->hand_at_report = hand;
		tracker->credited = (int64) reported;
		return 0;
	}

	/* The counter went backwards: it was reset; rebase what we credited. */
	if (reported < tracker->reported)
	{
		tracker->credited -= (int64) tracker->reported;
		tracker->reported = 0;
	}

	if (reported != tracker->reported)
	{
		uint64		counted = reported - tracker->reported;
		uint64		moved = hand - tracker->hand_at_report;

		*reported_delta = (int64) counted;

		/*
		 * Each clock-sweep allocation moves the hand at least once.  Fewer
		 * means, through 18, that the freelist served some, which the
		 * counter pays back anyway; on 19, where the clock sweep serves
		 * every allocation, only that the hand and the counter were read
		 * at different moments.
		 */
		if (counted >= ALLOC_CALIBRATION_MIN && moved > 0)
		{
			double		sample = Max((double) moved / (double) counted, 1.0);

			tracker->hand_per_alloc += (sample - tracker->hand_per_alloc) *
				ALLOC_CALIBRATION_WEIGHT;
		}
		tracker->reported = reported;
		tracker->hand_at_report = hand;
	}

	truth = (double) tracker->reported +
		(double) (hand - tracker->hand_at_report) / tracker->hand_per_alloc;
	owed = floor(truth - (double) tracker->credited);
	if (owed <= 0)
		return 0;
	if (owed > (double) PG_UINT32_MAX)
		owed = (double) PG_UINT32_MAX;
	tracker->credited += (int64) owed;
	return (uint32) owed;
}

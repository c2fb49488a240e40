/*-------------------------------------------------------------------------
 *
 * pacer.c
 *		The self-pacing controller of the bgw_jit worker.
 *
 * The worker keeps a clean reserve ahead of the clock hand.  Backends write
 * a dirty buffer themselves only when the hand runs past the cleaner's
 * frontier, so the controller plans in the hand's own units: buffers the
 * hand passes per second, measured exactly from its position.  Each cycle
 * it
 *
 * - smooths the hand's speed: up with a time constant of PACER_ATTACK_MS,
 *   down with one of smoothing_samples cycles of bgw_jit.delay (core's
 *   allocation average in time units: fast attack, slow decline);
 * - measures the surprise: how far the hand moved against how far the
 *   previous cycle planned for (its speed times its sleep).  Late
 *   wake-ups on a busy machine, the cycle's own work and bursts of speed
 *   all show here, which is what the margin must cover;
 * - sets the automatic margin to the PACER_MARGIN_QUANTILE quantile of
 *   the surprise, tracked by stochastic approximation (up by q steps when
 *   exceeded, down by 1 - q steps otherwise).  A lone stall or load step
 *   moves it by one step only, a lasting change by about a step per
 *   cycle, and at a steady load it settles instead of oscillating.  A
 *   cycle whose judged writes were re-dirtied (written too early) counts
 *   as one step down too;
 * - sleeps as long as it can without planning a lead over the hand larger
 *   than PACER_LEAD_MAX_FRACTION of the pool, within
 *   [PACER_MIN_SLEEP_MS, bgw_jit.delay], growing by at most a factor of
 *   two per cycle so that a wake-up after idling probes the new load
 *   before committing to long sleeps;
 * - cleans ahead to margin * speed * sleep, and writes at most what the
 *   rate budget (a token bucket of PACER_BURST_SECONDS) and the per-cycle
 *   cap allow.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "pacer.h"

static int
clamp_to_int(double value)
{
	if (!(value > 0))
		return 0;
	if (value >= (double) PG_INT32_MAX)
		return PG_INT32_MAX;
	return (int) value;
}

void
pacer_init(PacerState *state, const PacerParams *params)
{
	state->hand_rate = 0;
	state->margin = PACER_MARGIN_START;
	state->planned_ms = 0;
	state->tokens = params->write_rate * PACER_BURST_SECONDS;
}

/*
 * Forget the planned sleep, e.g. after waking early from hibernation: the
 * next cycle neither judges surprise nor sleeps long.
 */
void
pacer_restart(PacerState *state)
{
	state->planned_ms = 0;
}

void
pacer_plan(PacerState *state, const PacerParams *params,
		   const PacerInput *in, PacerPlan *plan)
{
	bool		auto_margin = (params->margin == PACER_MARGIN_AUTO);
	double		elapsed_s = Max(in->elapsed_us, 0) / 1e6;
	double		expected = state->hand_rate * state->planned_ms / 1000.0;
	double		rate_tau_s = params->smoothing_samples *
		params->max_sleep_ms / 1000.0;
	double		max_lead = PACER_LEAD_MAX_FRACTION * params->nbuffers;
	double		sleep_ms;
	double		lead;
	int			judged = in->evicted + in->redirtied;
	bool		judged_surprise;

	/* Surprise, against the speed and sleep the previous cycle planned. */
	judged_surprise = (state->planned_ms > 0 && expected >= PACER_MIN_EXPECTED);
	plan->surprise = judged_surprise ? in->hand_moved / expected : 0;

	/* The hand's speed: fast attack, slow decline. */
	if (elapsed_s > 0)
	{
		double		observed = in->hand_moved / elapsed_s;
		double		tau_s = (observed > state->hand_rate) ?
			PACER_ATTACK_MS / 1000.0 : rate_tau_s;

		state->hand_rate += (observed - state->hand_rate) *
			Min(1.0, elapsed_s / tau_s);
	}

	/* The automatic margin: a step towards the surprise's quantile. */
	if (auto_margin)
	{
		double		step = PACER_MARGIN_STEP +
			PACER_MARGIN_STEP_SHARE * (state->margin - 1.0);

		if (judged_surprise)
			state->margin += (plan->surprise > state->margin) ?
				step * PACER_MARGIN_QUANTILE :
				-step * (1 - PACER_MARGIN_QUANTILE);
		if (judged > 0 && in->redirtied > judged * PACER_WASTE_LIMIT)
			state->margin -= step * (1 - PACER_MARGIN_QUANTILE);
		state->margin = Max(state->margin, PACER_MARGIN_MIN);
		state->margin = Min(state->margin, PACER_MARGIN_MAX);
	}
	plan->margin = auto_margin ? state->margin : params->margin;

	/* Sleep: long, but not so long that the lead must cover the pool. */
	sleep_ms = params->max_sleep_ms;
	if (params->self_paced)
	{
		if (plan->margin * state->hand_rate > 0)
			sleep_ms = Min(sleep_ms, 1000.0 * max_lead /
						   (plan->margin * state->hand_rate));
		sleep_ms = Min(sleep_ms, 2 * Max(state->planned_ms,
										 PACER_MIN_SLEEP_MS / 2.0));
		sleep_ms = Max(sleep_ms, PACER_MIN_SLEEP_MS);
	}
	plan->sleep_ms = (int) sleep_ms;
	state->planned_ms = plan->sleep_ms;

	lead = plan->margin * state->hand_rate * plan->sleep_ms / 1000.0;
	plan->lead_target = clamp_to_int(Min(lead, params->nbuffers));
	plan->min_scan = clamp_to_int((double) params->nbuffers * plan->sleep_ms /
								  (params->scan_whole_pool_seconds * 1000.0));

	/* The write budget: what the rate allows, within the per-cycle cap. */
	if (params->write_rate > 0)
	{
		state->tokens = Min(state->tokens + params->write_rate * elapsed_s,
							params->write_rate * PACER_BURST_SECONDS);
		plan->write_budget = clamp_to_int(state->tokens);
	}
	else
		plan->write_budget = PG_INT32_MAX;
	if (params->maxpages >= 0)
		plan->write_budget = Min(plan->write_budget, params->maxpages);
}

/* Take this cycle's writes out of the rate budget. */
void
pacer_charge(PacerState *state, const PacerParams *params, int written)
{
	if (params->write_rate > 0)
		state->tokens -= written;
}

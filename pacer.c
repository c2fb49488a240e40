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
 * - closes that loop on what the margin is for: when the hand ran past
 *   the cleaned frontier beyond PACER_MISS_TARGET of its movement (or,
 *   16+, backends wrote dirty victims in such a stretch), the margin
 *   rises at once in proportion (pacer_misses());
 * - sleeps as long as it can without planning a lead over the hand larger
 *   than PACER_LEAD_MAX_FRACTION of the pool, within
 *   [PACER_MIN_SLEEP_MS, bgw_jit.delay], growing by at most a factor of
 *   two per cycle so that a wake-up after idling probes the new load
 *   before committing to long sleeps;
 * - cleans ahead to margin * speed * sleep, and on until as many
 *   reusable buffers lie ahead as margin * allocation rate * sleep, and
 *   writes at most what the rate budget allows: a token bucket of
 *   PACER_BURST_SECONDS at PACER_BUDGET_HEADROOM times the margin times
 *   the allocation rate (so finite by default, and bound only by bursts
 *   beyond what the load showed), within bgw_jit.max_write_rate and the
 *   per-cycle cap; with no movement, writes go at the rate the scans
 *   recently wrote (while allocations last) or one lap per
 *   scan_whole_pool_seconds, whichever is higher, for the time that
 *   passed.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "estimator.h"
#include "pacer.h"

/*
 * The share of the demand the cleaner missed since the previous cycle:
 * the hand's run past the cleaned frontier over its movement and, where
 * the backends' writes count dirty evictions (16+: pg_stat_io; 15's
 * buffers_backend also counts relation extensions), their increase over
 * the allocations since they last changed, if the hand ran past the
 * frontier in that stretch.  That count lags by up to a second and moves
 * in steps, so it is judged whenever it moves.
 */
static double
pacer_misses(PacerState *state, const PacerInput *in)
{
	double		misses = 0;

	if (in->hand_moved >= PACER_MIN_EXPECTED && in->overrun > 0)
		misses = Min(1.0, (double) in->overrun / in->hand_moved);

	if (!in->backend_known)
		return misses;
	state->alloc_since += in->alloc;
	state->overrun_since += Max(in->overrun, 0);
	if (state->backend_valid && in->backend_writes != state->backend_seen)
	{
		if (in->backend_writes > state->backend_seen &&
			state->overrun_since > 0 && state->alloc_since > 0)
			misses = Max(misses,
						 Min(1.0, (in->backend_writes - state->backend_seen) /
							 state->alloc_since));
		state->alloc_since = 0;
		state->overrun_since = 0;
	}
	state->backend_seen = in->backend_writes;
	state->backend_valid = true;
	return misses;
}

void
bgw_jit_pacer_init(PacerState *state, const PacerParams *params)
{
	state->hand_rate = 0;
	state->alloc_rate = 0;
	state->margin = PACER_MARGIN_START;
	state->planned_ms = 0;
	/* a full bucket at the floor rate, for the first cycles' writes */
	state->tokens = Max((double) params->nbuffers / params->scan_whole_pool_seconds,
						PACER_MIN_WRITE_RATE) * PACER_BURST_SECONDS;
	if (params->write_rate > 0)
		state->tokens = Min(state->tokens,
							params->write_rate * PACER_BURST_SECONDS);
	state->written_rate = 0;
	state->written_since = 0;
	state->backend_valid = false;
	state->backend_seen = 0;
	state->alloc_since = 0;
	state->overrun_since = 0;
	state->lead_saturated = false;
}

/*
 * Forget the planned sleep, e.g. after waking early from hibernation: the
 * next cycle neither judges surprise nor sleeps long.
 */
void
bgw_jit_pacer_restart(PacerState *state)
{
	state->planned_ms = 0;
}

void
bgw_jit_pacer_plan(PacerState *state, const PacerParams *params,
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
	double		lap_rate;
	double		idle_rate;
	double		rate;
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

		double		observed_alloc = in->alloc / elapsed_s;

		state->hand_rate += (observed - state->hand_rate) *
			Min(1.0, elapsed_s / tau_s);
		tau_s = (observed_alloc > state->alloc_rate) ?
			PACER_ATTACK_MS / 1000.0 : rate_tau_s;
		state->alloc_rate += (observed_alloc - state->alloc_rate) *
			Min(1.0, elapsed_s / tau_s);
		/* no fast attack: one cycle's batch is not a rate */
		state->written_rate += (state->written_since / elapsed_s -
								state->written_rate) *
			Min(1.0, elapsed_s / rate_tau_s);
		state->written_since = 0;
	}

	plan->misses = pacer_misses(state, in);

	/*
	 * The automatic margin: a step towards the surprise's quantile, which
	 * anticipates; a step up at once on misses, which are what the margin
	 * is for; a small step down when the writes came too early.
	 */
	if (auto_margin)
	{
		double		step = PACER_MARGIN_STEP +
			PACER_MARGIN_STEP_SHARE * (state->margin - 1.0);

		if (judged_surprise)
			state->margin += (plan->surprise > state->margin) ?
				step * PACER_MARGIN_QUANTILE :
				-step * (1 - PACER_MARGIN_QUANTILE);
		if (plan->misses > PACER_MISS_TARGET && !state->lead_saturated)
			state->margin += PACER_MISS_STEP *
				Min(1.0, plan->misses / PACER_MISS_FULL);
		else if (judged > 0 && in->redirtied > judged * PACER_WASTE_LIMIT)
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
	state->lead_saturated = (plan->sleep_ms <= PACER_MIN_SLEEP_MS &&
							 lead >= max_lead);
	plan->lead_target = bgw_jit_clamp_to_int(Min(lead, params->nbuffers));

	/*
	 * The lead in positions assumes the victims are spread as they were on
	 * average; a run of recently used buffers (an index after a prewarm)
	 * lets the hand jump far past it in one allocation.  What the hand
	 * really consumes is reusable buffers, one an allocation: have as many
	 * found ahead as the same margin covers in allocations.
	 */
	plan->reusable_target =
		bgw_jit_clamp_to_int(Min(plan->margin * state->alloc_rate *
								 plan->sleep_ms / 1000.0,
								 params->nbuffers));
	lap_rate = (double) params->nbuffers / params->scan_whole_pool_seconds;
	plan->min_scan = bgw_jit_clamp_to_int(lap_rate * plan->sleep_ms / 1000.0);

	/*
	 * With no movement, what lies ahead is written at the recent demand
	 * rate or one lap per scan_whole_pool, whichever is higher: never
	 * faster than the load needed it.  The demand is the rate the scans
	 * wrote at, while the allocations last (it declines with them): not
	 * the allocation rate alone, which counts clean victims too, so that
	 * an idle pass at it writes faster than the cleaner had to under the
	 * load.
	 *
	 * Paid for the time since the previous cycle began, at most one delay
	 * (after hibernating), not for the sleep to come: sleeps double after
	 * a load, so paying in advance wrote for periods longer than the ones
	 * that passed.
	 */
	idle_rate = Max(lap_rate, Min(state->alloc_rate, state->written_rate));
	plan->idle_pages = bgw_jit_clamp_to_int(idle_rate *
											Min(elapsed_s,
												params->max_sleep_ms / 1000.0));
	plan->idle_pages = Max(plan->idle_pages, 1);

	/*
	 * The write budget: a token bucket at the automatic rate, within the
	 * user's rate (a hard cap) and the per-cycle cap.
	 */
	rate = Max(PACER_BUDGET_HEADROOM * plan->margin * state->alloc_rate,
			   Max(lap_rate, PACER_MIN_WRITE_RATE));
	if (params->write_rate > 0)
		rate = Min(rate, params->write_rate);
	plan->write_rate = rate;
	state->tokens = Min(state->tokens + rate * elapsed_s,
						rate * PACER_BURST_SECONDS);
	plan->rate_pages = bgw_jit_clamp_to_int(state->tokens);
	plan->write_budget = plan->rate_pages;
	if (params->maxpages >= 0)
		plan->write_budget = Min(plan->write_budget, params->maxpages);
}

/* Take this cycle's writes out of the budget; they make the written rate. */
void
bgw_jit_pacer_charge(PacerState *state, const PacerParams *params, int written)
{
	state->tokens -= written;
	state->written_since += written;
}

/*
 * Pages the rate budget allows now: what a cycle's later slices may still
 * write (they plan nothing).
 */
int
bgw_jit_pacer_budget_left(const PacerState *state)
{
	return bgw_jit_clamp_to_int(state->tokens);
}

/*-------------------------------------------------------------------------
 *
 * pacer.h
 *		The self-pacing controller: how long to sleep, how far ahead of the
 *		clock hand to clean, how many pages a cycle may write, and the
 *		automatic safety margin.
 *
 * Pure functions of what each cycle measured, free of buffer-manager
 * calls, so that the worker's decisions can be replayed from the history
 * (bgw_jit_replay_pacer) and tested with exact values.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGW_JIT_PACER_H
#define BGW_JIT_PACER_H

#include "c.h"

/* bgw_jit.lru_multiplier = auto */
#define PACER_MARGIN_AUTO		(-1.0)

/*
 * The hand's speed rises towards a faster observation with this time
 * constant: quick enough to follow a load step within a few cycles, slow
 * enough that one short interval's noise does not set the pace.
 */
#define PACER_ATTACK_MS			50.0

/* Shortest sleep between cycles, as core's bgwriter_delay minimum. */
#define PACER_MIN_SLEEP_MS		10

/* Lead over the hand never planned beyond this share of the pool. */
#define PACER_LEAD_MAX_FRACTION	0.75

/*
 * The automatic margin tracks this quantile of the surprise (hand movement
 * over the movement planned for), moving by PACER_MARGIN_STEP plus
 * PACER_MARGIN_STEP_SHARE of its excess over 1 per cycle, within
 * [PACER_MARGIN_MIN, PACER_MARGIN_MAX].
 */
#define PACER_MARGIN_QUANTILE	0.99
#define PACER_MARGIN_STEP		0.02
#define PACER_MARGIN_STEP_SHARE	0.1
#define PACER_MARGIN_MIN		1.0
#define PACER_MARGIN_MAX		10.0
#define PACER_MARGIN_START		1.5

/* A cycle whose judged writes were more re-dirtied than this lowers the margin. */
#define PACER_WASTE_LIMIT		0.05

/* Expected hand movements smaller than this say nothing about surprise. */
#define PACER_MIN_EXPECTED		32.0

/* The rate budget saves up at most this many seconds of writes. */
#define PACER_BURST_SECONDS		1.0

/*
 * The automatic write budget: PACER_BUDGET_HEADROOM times the margin
 * times the allocation rate (each allocation evicts at most one dirty
 * page), never below one lap of the pool per scan_whole_pool_seconds nor
 * PACER_MIN_WRITE_RATE pages a second.  Not the hand's speed: the hand
 * passes many buffers in use for each one it evicts, which would let the
 * idle pass after a load write far faster than the load needed.
 */
#define PACER_BUDGET_HEADROOM	2.0
#define PACER_MIN_WRITE_RATE	1000.0

/*
 * The misses: the share of the hand's movement that ran past the cleaned
 * frontier.  Above PACER_MISS_TARGET the automatic margin rises at once,
 * by up to PACER_MISS_STEP (reached at a miss share of PACER_MISS_FULL).
 * Where the server counts the backends' writes of dirty victims (16+),
 * their share of the allocations counts too, but only over a stretch in
 * which the hand also ran past the frontier: a page dirtied again after
 * the cleaner passed it is written by a backend whatever the margin.  Nor
 * do misses raise it while the last plan already slept the shortest sleep
 * with the lead at its cap (a pool the hand passes faster than the worker
 * can wake): a larger margin would lead no further there.
 */
#define PACER_MISS_TARGET		0.001
#define PACER_MISS_FULL			0.01
#define PACER_MISS_STEP			0.25

typedef struct PacerParams
{
	double		margin;			/* bgw_jit.lru_multiplier or PACER_MARGIN_AUTO */
	bool		self_paced;		/* bgw_jit.pacing = auto */
	int			max_sleep_ms;	/* bgw_jit.delay */
	int			smoothing_samples;	/* bgw_jit.smoothing_samples */
	int			scan_whole_pool_seconds;	/* bgw_jit.scan_whole_pool_seconds */
	int			nbuffers;
	double		write_rate;		/* pages per second; 0 = unlimited */
	int			maxpages;		/* per-cycle cap; -1 = none */
} PacerParams;

/* Carried from cycle to cycle. */
typedef struct PacerState
{
	double		hand_rate;		/* clock-hand speed, buffers/s, smoothed */
	double		alloc_rate;		/* allocations/s, smoothed the same way */
	double		margin;			/* the automatic margin */
	double		planned_ms;		/* sleep the previous cycle planned; 0: none */
	double		tokens;			/* pages the rate budget allows now */
	double		written_rate;	/* pages/s the scans wrote, smoothed */
	double		written_since;	/* pages charged since the last plan */
	bool		backend_valid;	/* backend_seen holds a reading */
	uint64		backend_seen;	/* backends' writes as last read */
	double		alloc_since;	/* allocations since they last changed */
	double		overrun_since;	/* overruns since they last changed */
	bool		lead_saturated; /* the last plan: shortest sleep, lead at
								 * its cap, so a larger margin leads no
								 * further */
} PacerState;

/* What a cycle measured since the previous one began. */
typedef struct PacerInput
{
	int64		elapsed_us;
	int64		hand_moved;		/* buffers the clock hand passed */
	int			evicted;		/* earlier writes whose page left its buffer */
	int			redirtied;		/* earlier writes whose page was dirty again */
	int64		overrun;		/* buffers the hand ran past the frontier */
	uint32		alloc;			/* allocations credited to the cycle */
	bool		backend_known;	/* backend_writes counts dirty evictions */
	uint64		backend_writes; /* backends' own writes, cumulative, lagged */
} PacerInput;

/* What the controller decided for this cycle. */
typedef struct PacerPlan
{
	double		surprise;		/* hand movement / planned; 0 if unknown */
	double		misses;			/* share of the demand missed; see above */
	double		margin;			/* margin in force this cycle */
	int			lead_target;	/* buffers ahead of the hand to clean to */
	int			reusable_target;	/* reusable buffers to have found ahead */
	int			min_scan;		/* buffers to scan at least (idle laps) */
	int			idle_pages;		/* writes an idle cycle may make */
	double		write_rate;		/* the budget's rate, pages/s */
	int			rate_pages;		/* pages the rate allows this cycle */
	int			write_budget;	/* of which the LRU scan: lru_maxpages */
	int			sleep_ms;		/* before the next cycle */
} PacerPlan;

extern void bgw_jit_pacer_init(PacerState *state, const PacerParams *params);
extern void bgw_jit_pacer_restart(PacerState *state);
extern void bgw_jit_pacer_plan(PacerState *state, const PacerParams *params,
							   const PacerInput *in, PacerPlan *plan);
extern void bgw_jit_pacer_charge(PacerState *state, const PacerParams *params,
								 int written);
extern int	bgw_jit_pacer_budget_left(const PacerState *state);


#endif							/* BGW_JIT_PACER_H */

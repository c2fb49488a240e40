/*-------------------------------------------------------------------------
 *
 * scan.c
 *		The worker's two scans over the buffer pool: the LRU scan ahead of
 *		the clock hand and jit+all's all-buffers scan, both bounded by the
 *		cycle's write budget and time slice.
 *
 * The LRU scan keeps a frontier in the hand's own coordinate (cumulative
 * movement): the buffers between the hand and the frontier have been
 * examined since the hand last passed them.  Under load it scans to the
 * lead the controller asks for (pacer.c) and on while fewer reusable
 * buffers than it asks for lie ahead, or as far as core's estimate says
 * with fixed pacing; with no movement at all it goes on around the
 * pool, its writes spread at the recent demand rate or one lap per
 * bgw_jit.scan_whole_pool_seconds, whichever is higher (core's idle lap),
 * so that what a busy period left dirty is not written in one burst.
 * Either way no cycle works longer than SCAN_SLICE_MS.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sched.h>
#include <time.h>

#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/buf_internals.h"
#include "utils/memutils.h"

#include "bgw_jit.h"
#include "cleaner.h"
#include "flusher.h"
#include "scan.h"
#include "writers.h"

/*
 * Look at the CPU clock (a system call) after every this many writes and
 * every this many buffers.
 */
#define SLICE_CHECK_WRITES	16
#define SLICE_CHECK_EVERY	256

/*
 * Give up the CPU (sched_yield) after every this much of a scan's CPU
 * time, to whatever is queued on the same CPU; with nothing queued the
 * call returns at once.  The worker sleeps most of the time, so when it
 * wakes the scheduler owes it CPU and lets it run a whole cycle ahead of
 * the backends queued there, and the transactions it lands on make the
 * tail latency.  The interval was chosen by measurement:
 * doc/performance.md, "Tail latency".
 */
#define SCAN_YIELD_US	100

/*
 * Pages the LRU scan put off until the WAL flusher has flushed their WAL
 * (flusher.c), with their place in the hand's coordinate; retried at the
 * start of every scan until written, or passed by the hand.  When full,
 * the scan writes such pages at once, flushing for itself.
 */
#define SCAN_DEFERRED_MAX	256

typedef struct DeferredPage
{
	int64		position;
	CleanerDeferred page;
} DeferredPage;

static DeferredPage deferred[SCAN_DEFERRED_MAX];
static int	n_deferred = 0;

/*
 * Reusable buffers the LRU scan found between the hand and the frontier,
 * counted per segment of REUSABLE_SEGMENTS-th of the pool (in the hand's
 * coordinate) so that what the hand has passed can be taken off: a ring
 * of counts, the segment the hand is in at reusable_hand_segment.  It
 * over-counts by what the hand took from its own segment and by buffers
 * used again since they were found: the positional lead stays the floor.
 */
#define REUSABLE_SEGMENTS	1024

static uint32 *reusable_counts = NULL;
static int	reusable_ring;		/* entries in reusable_counts */
static int	reusable_segment;	/* buffers per segment */
static int64 reusable_hand_segment;
static int64 reusable_ahead;

/*
 * The cycle under way, over its slices: what its start estimated and what
 * its scans did so far, against which its later slices are capped.
 */
typedef struct ScanCycle
{
	JitEstimate est;			/* fixed pacing: the estimate at its start */
	int			reusable;		/* reusable buffers believed ahead */
	int64		scanned;		/* by the LRU scan */
	int64		found;			/* reusable buffers the LRU scan found */
	int			written;		/* by the LRU scan */
	int			all_scanned;	/* by the all-buffers scan */
	int			all_written;
	bool		open;			/* scanned, its density not yet taken */
} ScanCycle;

static ScanCycle scan_cycle;

static uint32 handoff_turn = 0;	/* pages to be written, for writers.c */
static int	slice_handed = 0;	/* pages handed to the writers this slice */
static bool cleaner_valid = false;
static int64 clean_position;	/* the frontier, in the hand's coordinate */
static int	all_next_to_clean = 0;	/* the all-buffers scan's position */
static JitState jit_state;
static WritebackContext wb_context;

void
bgw_jit_scan_init(int *flush_after)
{
	bgw_jit_estimator_init(&jit_state);
	WritebackContextInit(&wb_context, flush_after);
	/* (the frontier never runs a lap ahead: segments of one lap and two) */
	reusable_segment = Max(16, (NBuffers + REUSABLE_SEGMENTS - 1) /
						   REUSABLE_SEGMENTS);
	reusable_ring = NBuffers / reusable_segment + 2;
	reusable_counts = MemoryContextAllocZero(TopMemoryContext,
											 sizeof(uint32) * reusable_ring);
}

/* Start counting afresh from the hand at hand_position. */
static void
reusable_restart(int64 hand_position)
{
	memset(reusable_counts, 0, sizeof(uint32) * reusable_ring);
	reusable_hand_segment = hand_position / reusable_segment;
	reusable_ahead = 0;
}

/* Take off the counts of the segments the hand has left since. */
static void
reusable_follow_hand(int64 hand_position)
{
	int64		segment = hand_position / reusable_segment;

	if (segment - reusable_hand_segment >= reusable_ring)
	{
		reusable_restart(hand_position);
		return;
	}
	for (; reusable_hand_segment < segment; reusable_hand_segment++)
	{
		uint32	   *count = &reusable_counts[reusable_hand_segment % reusable_ring];

		reusable_ahead -= *count;
		*count = 0;
	}
}

/* After an ERROR: forget writeback requests of the failed cycle. */
void
bgw_jit_scan_reset_writeback(int *flush_after)
{
	WritebackContextInit(&wb_context, flush_after);
}

/* CPU time of this thread, microseconds. */
int64
bgw_jit_scan_thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Start a slice: a new cycle, or (continues) a later slice of the cycle
 * whose last slice ran out of time.  A later slice takes no new estimate
 * and shares the cycle's per-cycle caps; 'pages' is what the rate budget
 * allows now.
 */
void
bgw_jit_scan_limit_start(ScanLimit *limit, int pages, bool continues)
{
	limit->start_cpu_us = bgw_jit_scan_thread_cpu_us();
	limit->yield_cpu_us = limit->start_cpu_us;
	limit->slice_ms = BGW_JIT_SLICE_US / 1000.0;
	limit->pages = pages;
	limit->continues = continues;
	limit->out_of_time = false;
	slice_handed = 0;
	if (!continues)
	{
		/* a cycle the worker ended before its scan did is a sample too */
		if (scan_cycle.open)
			bgw_jit_scan_end_cycle();
		memset(&scan_cycle, 0, sizeof(scan_cycle));
	}
}

/*
 * The cycle is over: its scan, over all its slices, is one sample of the
 * density.
 */
void
bgw_jit_scan_end_cycle(void)
{
	JitParams	params;

	params.smoothing_samples = bgw_jit_smoothing_samples;
	bgw_jit_refine_density(&jit_state, &params, scan_cycle.scanned,
						   scan_cycle.found);
	scan_cycle.open = false;
}

/* Like core with lru_maxpages = 0: the next scan restarts at the hand. */
void
bgw_jit_scan_forget_frontier(void)
{
	cleaner_valid = false;
	n_deferred = 0;
}

/*
 * How far the hand at hand_position has run past the frontier: the
 * buffers it passed that the cleaner had not reached, which backends may
 * have had to write.  Known before the cycle plans, so that the margin
 * answers a miss in the cycle that finds it.
 */
int64
bgw_jit_scan_overrun(int64 hand_position)
{
	int64		lead = clean_position - hand_position;

	return (cleaner_valid && lead < 0) ? -lead : 0;
}

/*
 * Pages the slice's LRU scan handed to the writers: charged to the write
 * budget now, before they are written, as the cleaner's own writes are.
 */
int
bgw_jit_scan_handed(void)
{
	return slice_handed;
}

int
bgw_jit_scan_next_to_clean(void)
{
	return (int) (clean_position % NBuffers);
}

const JitState *
bgw_jit_scan_estimates(void)
{
	return &jit_state;
}

/*
 * Whether the cycle's CPU time is up; notes it in the limit.  Yields the
 * CPU on the way when SCAN_YIELD_US of it have passed.
 */
static bool
slice_over(ScanLimit *limit)
{
	int64		now = bgw_jit_scan_thread_cpu_us();

	if (now - limit->yield_cpu_us >= SCAN_YIELD_US)
	{
		sched_yield();
		limit->yield_cpu_us = now;
	}
	if (now - limit->start_cpu_us < limit->slice_ms * 1000.0)
		return false;
	limit->out_of_time = true;
	return true;
}

/*
 * After each buffer a scan visits: whether to look at the slice's CPU time
 * before the next one (*check_slice: after every SLICE_CHECK_WRITES pages
 * written, every SLICE_CHECK_EVERY buffers visited), and whether the scan
 * goes on.  A long scan must still answer interrupts and shutdown promptly.
 */
static inline bool
scan_goes_on(int outcome, int written, int scanned, bool *check_slice)
{
	*check_slice = ((outcome & CLEANER_WRITTEN) &&
					written % SLICE_CHECK_WRITES == 0) ||
		(scanned % SLICE_CHECK_EVERY) == 0;
	if ((scanned & 1023) == 0)
	{
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			return false;
	}
	return true;
}

/*
 * Neighbours a write took along (bgw_jit_cleaner_sync_buffer() only visits
 * them after a write): add their judgements, clear *c and return how many
 * it wrote.
 */
static inline int
take_combined(BgwJitCycle *e, CleanerCombined *c)
{
	int			written = c->written;

	e->combined += written;
	e->evicted += c->evicted;
	e->redirtied += c->redirtied;
	memset(c, 0, sizeof(*c));
	return written;
}

/* Earlier writes the scan just judged. */
static inline void
count_judgements(BgwJitCycle *e, int outcome)
{
	e->evicted += (outcome & CLEANER_EVICTED) ? 1 : 0;
	e->redirtied += (outcome & CLEANER_REDIRTIED) ? 1 : 0;
}

/*
 * Write the pages put off whose WAL is flushed now, while the write cap
 * allows; forget those the hand has passed (a backend has evicted them,
 * or they are in use again).  Returns how many it left reusable.
 *
 * Each page leaves the list before it is written and goes back if it is
 * still to be written later, so that an ERROR writing it (a file that
 * cannot be written) drops that page alone, instead of leaving it first in
 * line to fail again in every cycle before the scan could run.  The list
 * is walked from its end: [0, i) waits, [i, n_deferred) is kept.
 */
static int
retry_deferred(int64 hand_position, int write_cap, BgwJitCycle *e)
{
	int			reusable = 0;

	for (int i = n_deferred - 1; i >= 0; i--)
	{
		DeferredPage d = deferred[i];
		int			outcome;

		deferred[i] = deferred[--n_deferred];
		if (d.position < hand_position)
			continue;
		if (e->written >= write_cap || bgw_jit_wal_flush_pending(d.page.lsn))
		{
			deferred[n_deferred++] = d;
			continue;
		}
		outcome = bgw_jit_cleaner_sync_deferred((int) (d.position % NBuffers),
												&d.page,
												bgw_jit_wal_flusher_running(),
												&wb_context);
		count_judgements(e, outcome);
		if (outcome & CLEANER_WRITTEN)
			e->written++;
		else if (outcome & CLEANER_DEFERRED)
		{
			(void) bgw_jit_request_wal_flush(d.page.lsn);
			deferred[n_deferred++] = d;
		}
		if (outcome & CLEANER_REUSABLE)
		{
			reusable_counts[(d.position / reusable_segment) % reusable_ring]++;
			reusable_ahead++;
			reusable++;
		}
	}
	return reusable;
}

/*
 * A reusable buffer the LRU scan found just behind its frontier: one more
 * in the cycle's count and in the reusable-count lead.
 */
static inline void
note_reusable(int outcome, int *reusable_buffers)
{
	if (outcome & CLEANER_REUSABLE)
	{
		(*reusable_buffers)++;
		reusable_counts[((clean_position - 1) / reusable_segment) %
						reusable_ring]++;
		reusable_ahead++;
	}
}

/*
 * The LRU scan proper; fills in e.
 *
 * Self-paced jit scans until the frontier is plan->lead_target buffers
 * ahead of the hand and plan->reusable_target reusable buffers lie in
 * between, or with no movement on around the pool at the idle pace;
 * fixed-paced jit until core's estimate of reusable buffers is found;
 * lap a fixed share of the pool.  All stop at the write budget,
 * at the end of the slice and short of lapping the hand.  The frontier
 * steps past a buffer before writing it, so that after an ERROR writing
 * it the next cycle goes on with the next one.
 */
void
bgw_jit_scan_lru(const ScanRequest *req, ScanLimit *limit, BgwJitCycle *e)
{
	const PacerPlan *plan = req->plan;
	JitParams	params;
	JitEstimate est;
	ScanCycle  *c = &scan_cycle;
	bool		lap = (bgw_jit_strategy == BGW_JIT_STRATEGY_LAP);
	bool		self_paced = (!lap && bgw_jit_pacing == BGW_JIT_PACING_AUTO &&
							  bgw_jit_strategy == BGW_JIT_STRATEGY_JIT);
	int64		strategy_delta = req->strategy_delta;
	bool		moving = (req->strategy_delta != 0 || req->recent_alloc != 0);
	int64		lead = clean_position - req->hand_position;
	int			num_to_scan;
	int			lead_scan = 0;
	bool		reach_reusable = false;
	int			budget_cap = Max(0, Min(limit->pages,
										plan->write_budget - c->written));
	int			write_cap = budget_cap;
	int			reusable_buffers;
	bool		check_slice = false;
	CleanerCombined combined = {0};
	int			handed = 0;		/* pages handed to the writers */

	if (!cleaner_valid || lead < 0)
	{
		/* Lapped by the hand, or (re)starting: clean from the hand on. */
		if (cleaner_valid)
		{
			e->lapped = true;
			e->overrun = -lead;
		}
		clean_position = req->hand_position;
		lead = 0;
		/* no hand movement to learn from after (re)starting */
		if (!cleaner_valid)
		{
			strategy_delta = 0;
			reusable_restart(req->hand_position);
		}
	}
	reusable_follow_hand(req->hand_position);
	cleaner_valid = true;
	e->bufs_ahead = (int) lead;

	/* one estimate a cycle: its later slices are no new sample */
	if (!limit->continues)
	{
		params.multiplier = plan->margin;
		params.smoothing_samples = bgw_jit_smoothing_samples;
		params.delay_ms = bgw_jit_delay;
		params.scan_whole_pool_seconds = bgw_jit_scan_whole_pool_seconds;
		params.nbuffers = NBuffers;
		bgw_jit_estimate(&jit_state, &params, req->recent_alloc,
						 strategy_delta, e->bufs_ahead, &c->est);
		c->reusable = c->est.reusable_buffers_est;
	}
	est = c->est;
	e->upcoming_alloc_est = est.upcoming_alloc_est;

	num_to_scan = NBuffers - e->bufs_ahead;
	if (lap)
		num_to_scan = Min(num_to_scan,
						  (int) ceil(NBuffers * bgw_jit_lru_percent / 100.0) -
						  (int) c->scanned);
	else if (self_paced && moving)
	{
		/* to the lead, then on while too few reusable buffers lie ahead */
		lead_scan = Min(num_to_scan,
						Max(plan->lead_target - e->bufs_ahead,
							plan->min_scan - (int) c->scanned));
		reach_reusable = true;
	}
	else if (self_paced)
		write_cap = Min(write_cap, plan->idle_pages - c->written);
	reusable_buffers = c->reusable;

	reusable_buffers += retry_deferred(req->hand_position, write_cap, e);

	while (e->scanned < num_to_scan &&
		   (lap || self_paced || reusable_buffers < est.upcoming_alloc_est))
	{
		int			next_to_clean;
		int			outcome;

		if (reach_reusable && e->scanned >= lead_scan &&
			reusable_ahead >= plan->reusable_target)
			break;
		if (e->written + handed >= write_cap)
		{
			/* the budget or the cap, not the idle pace, is a maxwritten */
			e->hit_maxpages = (write_cap == budget_cap);
			break;
		}
		if (check_slice && slice_over(limit))
			break;

		/* step past it first: an ERROR writing it goes on after it */
		next_to_clean = (int) (clean_position % NBuffers);
		clean_position++;
		e->scanned++;

		/*
		 * With writers, every req->writers-th page to be written is the
		 * cleaner's; the others go to the writers while their queue takes
		 * them.
		 */
		outcome = 0;
		if (req->writers > 1)
		{
			BufferTag	tag;

			outcome = bgw_jit_cleaner_claim(next_to_clean, &tag);
			count_judgements(e, outcome);
			if ((outcome & CLEANER_CLAIMED) &&
				handoff_turn++ % req->writers != 0 &&
				bgw_jit_writers_push(next_to_clean, &tag, req->writers - 1))
			{
				/*
				 * Reserve, as the cleaner's own writes are: a writer
				 * writes it within the queue's length.  (Counted only once
				 * written, each handed page made the scan look for one
				 * more: with k processes up to k times the lead.)
				 */
				handed++;
				note_reusable(CLEANER_REUSABLE, &reusable_buffers);
			}
			else if (outcome & CLEANER_CLAIMED)
				outcome = 0;	/* the cleaner's own, below */
			else
				note_reusable(outcome, &reusable_buffers);
		}

		/*
		 * (neighbours written along count against the budget too; a page
		 * is put off only while the flusher runs to flush its WAL)
		 */
		if (outcome == 0 || req->writers <= 1)
		{
			outcome = bgw_jit_cleaner_sync_buffer(next_to_clean, &wb_context,
												  false,
												  Min(bgw_jit_combine_limit,
													  write_cap - e->written - handed),
												  &combined,
												  (n_deferred < SCAN_DEFERRED_MAX &&
												   bgw_jit_wal_flusher_running()) ?
												  &deferred[n_deferred].page : NULL);
			count_judgements(e, outcome);
			if (outcome & CLEANER_DEFERRED)
			{
				(void) bgw_jit_request_wal_flush(deferred[n_deferred].page.lsn);
				deferred[n_deferred++].position = clean_position - 1;
				e->wal_deferred++;
			}
			note_reusable(outcome, &reusable_buffers);
			if (outcome & CLEANER_WRITTEN)
				e->written += 1 + take_combined(e, &combined);
		}
		if (!scan_goes_on(outcome, e->written, e->scanned, &check_slice))
			break;
	}
	limit->pages -= e->written + handed;
	slice_handed = handed;

	e->reusable_found = reusable_buffers - c->reusable;
	c->open = true;
	c->reusable = reusable_buffers;
	c->scanned += e->scanned;
	c->found += e->reusable_found;
	c->written += e->written + handed;
}

/*
 * The 8.x "all buffers" scan of jit+all: its own circular position, a
 * fixed share of the pool per cycle, dirty unpinned buffers written
 * whatever their usage count, to spread out checkpoint writes.  It runs
 * after the LRU scan, on what that left of the budget and the slice.
 */
void
bgw_jit_scan_all(ScanLimit *limit, BgwJitCycle *e)
{
	ScanCycle  *c = &scan_cycle;
	int			num_to_scan = (int) Min(ceil(NBuffers * bgw_jit_all_percent / 100.0),
										NBuffers) - c->all_scanned;
	int			write_cap = Min(bgw_jit_all_maxpages - c->all_written,
								limit->pages);
	int			scanned = 0;
	bool		check_slice = true;

	while (scanned < num_to_scan && e->all_written < write_cap)
	{
		CleanerCombined combined = {0};
		int			buf_id = all_next_to_clean;
		int			outcome;

		if (check_slice && slice_over(limit))
			break;

		/* step past it first: an ERROR writing it goes on after it */
		if (++all_next_to_clean >= NBuffers)
			all_next_to_clean = 0;
		scanned++;
		outcome = bgw_jit_cleaner_sync_buffer(buf_id, &wb_context, true,
											  Min(bgw_jit_combine_limit,
												  write_cap - e->all_written),
											  &combined, NULL);
		count_judgements(e, outcome);
		if (outcome & CLEANER_WRITTEN)
			e->all_written += 1 + take_combined(e, &combined);
		if (!scan_goes_on(outcome, e->all_written, scanned, &check_slice))
			break;
	}
	limit->pages -= e->all_written;
	c->all_scanned += scanned;
	c->all_written += e->all_written;
}

/*-------------------------------------------------------------------------
 *
 * cleaner.c
 *		Write one shared buffer the way the built-in writer does, and judge
 *		afterwards whether writing it was worth it.
 *
 * Core's SyncOneBuffer() is static, so this uses exported calls: copy the
 * tag under the header lock, pin with ReadRecentBuffer() (which re-checks
 * the tag and, for a first pin, leaves the usage count alone), then
 * FlushOneBuffer() under a share content lock (share-exclusive on 19).
 * Between our header unlock and the pin a backend may use the page again;
 * the cost is at most one extra write, never a wrong one.
 *
 * Judging earlier writes: after writing a buffer the worker marks it with
 * a hash of the page's tag (clean_marks, one uint32 per buffer,
 * touched only by the worker).  The next time any scan meets the buffer
 * it looks at what the buffer holds now, which is all it can see:
 *
 * - the same page, dirty: the page was dirtied again before it was
 *   evicted, so the early write certainly bought nothing ("redirtied");
 * - another page, or none (the tag is no longer valid): the page left the
 *   buffer ("evicted").  Usually it was evicted clean, sparing a backend
 *   a write; but the page may also have been dirtied and written again
 *   by someone else between two visits, or its relation dropped or
 *   truncated (through 18 the buffer then goes to the freelist and is soon
 *   reused; 19 has no freelist, and the buffer stays put, unused, until
 *   the clock sweep reaches it).
 *   From the buffer alone these cannot be told apart, so "evicted" is an
 *   upper bound on useful writes and "redirtied" a lower bound on wasted
 *   ones;
 * - the same page, clean: still pending, judged at a later visit.  (A
 *   page evicted and read back into the same buffer between two visits
 *   looks as if it had never left.)
 *
 * Every mark is judged at most once, and marks are cleared when the
 * statistics are reset, so judgements never exceed the writes counted.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/hashfn.h"
#include "executor/instrument.h"
#include "storage/bufmgr.h"
#include "storage/buf_internals.h"
#include "storage/shmem.h"

#include "bgw_jit.h"
#include "cleaner.h"
#include "compat.h"

#define BUF_REUSABLE_STATE(s) \
	(BUF_STATE_GET_REFCOUNT(s) == 0 && BUF_STATE_GET_USAGECOUNT(s) == 0)
#define BUF_VALID_DIRTY(s) \
	(((s) & (BM_VALID | BM_DIRTY)) == (BM_VALID | BM_DIRTY))

/* The clean marks, in shared memory: touched only by the worker. */
static uint32 *clean_marks = NULL;

/* Buffers a scan may write: dirty, unpinned and, unless any_usage, unused. */
static inline bool
write_candidate(CompatBufState state, bool any_usage)
{
	return BUF_VALID_DIRTY(state) && BUF_STATE_GET_REFCOUNT(state) == 0 &&
		(any_usage || BUF_STATE_GET_USAGECOUNT(state) == 0);
}

/* Identity of a page as kept in a clean mark; 0 means "no mark". */
static inline uint32
tag_mark(const BufferTag *tag)
{
	uint32		h = hash_bytes((const unsigned char *) tag, sizeof(BufferTag));

	return h == 0 ? 1 : h;
}

/*
 * Judge the mark of a buffer we wrote earlier, from its header as read
 * under the header lock.  Returns CLEANER_EVICTED, CLEANER_REDIRTIED or 0
 * (still pending), clearing the mark once judged.
 */
static int
resolve_mark(uint32 *mark, BufferDesc *desc, CompatBufState state)
{
	int			result;

	/*
	 * Tag no longer valid: on 15 the buffer was invalidated (relation
	 * dropped or truncated), on 16+ it may also be in the middle of
	 * eviction.  Either way the page has left.
	 */
	if (!(state & BM_TAG_VALID) || tag_mark(&desc->tag) != *mark)
		result = CLEANER_EVICTED;
	else if (state & BM_DIRTY)
		result = CLEANER_REDIRTIED;
	else
		return 0;
	*mark = 0;
	return result;
}

Size
bgw_jit_cleaner_shmem_size(void)
{
	return mul_size(NBuffers, sizeof(uint32));
}

/* Attach to the clean marks; the caller holds AddinShmemInitLock. */
void
bgw_jit_cleaner_shmem_startup(void)
{
	bool		found;

	clean_marks = ShmemInitStruct("bgw_jit clean marks",
								  bgw_jit_cleaner_shmem_size(), &found);
	if (!found)
		memset(clean_marks, 0, bgw_jit_cleaner_shmem_size());
}

/* Forget every mark: their writes belong to a period that was reset. */
void
bgw_jit_cleaner_clear_marks(void)
{
	memset(clean_marks, 0, bgw_jit_cleaner_shmem_size());
}

/*
 * Examine shared buffer 'buf_id' (0-based) and write it if it is valid,
 * dirty, unpinned and has usage count 0 (any usage count with any_usage);
 * with 'expect', only if it holds that page.  Returns CLEANER_* flags and,
 * when it wrote, the page's tag in *written.  With 'deferred', a page
 * whose WAL is not flushed yet is not written but put off
 * (CLEANER_DEFERRED; its tag in *written, its LSN in *deferred): whoever
 * flushes that WAL, the caller arranges it.  With 'claim_only', a
 * buffer that would be written is not: CLEANER_CLAIMED, its tag in
 * *written, for another process to write.  (ReadRecentBuffer makes room
 * in CurrentResourceOwner for its pin.)
 */
static int
sync_buffer(int buf_id, const BufferTag *expect, WritebackContext *wb_context,
			bool any_usage, BufferTag *written, XLogRecPtr *deferred,
			bool claim_only)
{
	BufferDesc *desc = GetBufferDescriptor(buf_id);
	uint32	   *mark = &clean_marks[buf_id];
	Buffer		buffer = buf_id + 1;
	CompatBufState state;
	BufferTag	tag;
	int			result = 0;
	int64		written_before;
	bool		wrote;

	/*
	 * Most buffers under load are pinned, recently used or clean: decide
	 * those from an unlocked read, and take the header spinlock only for
	 * likely candidates and for buffers whose mark needs resolving.
	 */
	state = compat_read_buf_state(desc);
	if (*mark == 0 && !write_candidate(state, any_usage))
		return BUF_REUSABLE_STATE(state) ? CLEANER_REUSABLE : 0;

	state = LockBufHdr(desc);
	if (*mark != 0)
		result |= resolve_mark(mark, desc, state);
	if (BUF_REUSABLE_STATE(state))
		result |= CLEANER_REUSABLE;
	if (!write_candidate(state, any_usage) ||
		(expect != NULL && !compat_tags_equal(&desc->tag, expect)))
	{
		compat_unlock_buf_hdr(desc, state);
		return result;
	}
	tag = desc->tag;
	compat_unlock_buf_hdr(desc, state);

	/* dirty still: reserve only if the scan hands it to a writer */
	if (claim_only)
	{
		*written = tag;
		return (result & ~CLEANER_REUSABLE) | CLEANER_CLAIMED;
	}

	/* It was evicted and reused in between: no longer ours to judge. */
	if (!compat_pin_if_tag(&tag, buffer, state))
		return result & ~CLEANER_REUSABLE;

	/* Used again before we pinned it: writing now would likely be wasted. */
	if (!any_usage &&
		BUF_STATE_GET_USAGECOUNT(compat_read_buf_state(desc)) != 0)
	{
		ReleaseBuffer(buffer);
		return result & ~CLEANER_REUSABLE;
	}

	LockBuffer(buffer, COMPAT_FLUSH_LOCK);

	/*
	 * FlushBuffer() would wait here for the WAL up to the page's LSN to be
	 * flushed (unlogged pages carry fake LSNs, and need none).
	 */
	if (deferred != NULL && (state & BM_PERMANENT))
	{
		XLogRecPtr	lsn = BufferGetLSNAtomic(buffer);

		if (XLogNeedsFlush(lsn))
		{
			LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
			ReleaseBuffer(buffer);
			*written = tag;
			*deferred = lsn;
			/* dirty still: no reserve until written */
			return (result & ~CLEANER_REUSABLE) | CLEANER_DEFERRED;
		}
	}

#ifdef BGW_JIT_FAULT_INJECTION
	if (bgw_jit_inject_error == BGW_JIT_INJECT_WRITE)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("injected error with buffer %d pinned and locked",
						buffer)));
#endif
	written_before = pgBufferUsage.shared_blks_written;
	FlushOneBuffer(buffer);
	wrote = pgBufferUsage.shared_blks_written != written_before;
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	ReleaseBuffer(buffer);

	if (wrote)
	{
		*mark = tag_mark(&tag);
		compat_schedule_writeback(wb_context, &tag);
		*written = tag;
		result |= CLEANER_WRITTEN;
	}
	return result;
}

/* The shared buffer holding page 'tag', or -1. */
static int
lookup_buffer(BufferTag *tag)
{
	uint32		hash = BufTableHashCode(tag);
	LWLock	   *partition = BufMappingPartitionLock(hash);
	int			buf_id;

	LWLockAcquire(partition, LW_SHARED);
	buf_id = BufTableLookup(tag, hash);
	LWLockRelease(partition);
	return buf_id;
}

/*
 * Write the neighbours of page 'tag', just written: the blocks right
 * before it, then right after it, in the same relation fork and segment
 * file, while they are in shared buffers and qualify as the page did.
 * A run stops at the first block that does not, so that what reaches the
 * kernel is one contiguous range; at most limit - 1 extra pages.
 * Neighbours are written whatever their place in the clock: a page of
 * usage count 0 is the next victim wherever it is.
 */
static void
write_neighbours(const BufferTag *tag, int limit, WritebackContext *wb_context,
				 bool any_usage, bool defer_wal, CleanerCombined *combined)
{
	BlockNumber segment_start = tag->blockNum - tag->blockNum % RELSEG_SIZE;
	BlockNumber segment_end = segment_start + (RELSEG_SIZE - 1);
	int			room = limit - 1;
	int			direction;

	for (direction = -1; direction <= 1 && room > 0; direction += 2)
	{
		BufferTag	next = *tag;

		while (room > 0)
		{
			BufferTag	written;
			XLogRecPtr	lsn;
			int			buf_id;
			int			outcome;

			if (direction < 0 ? next.blockNum == segment_start :
				next.blockNum == segment_end)
				break;
			next.blockNum += direction;
			buf_id = lookup_buffer(&next);
			if (buf_id < 0)
				break;
			/* (one whose WAL is not flushed ends the run, not put off) */
			outcome = sync_buffer(buf_id, &next, wb_context, any_usage,
								  &written, defer_wal ? &lsn : NULL, false);
			combined->evicted += (outcome & CLEANER_EVICTED) ? 1 : 0;
			combined->redirtied += (outcome & CLEANER_REDIRTIED) ? 1 : 0;
			if (!(outcome & CLEANER_WRITTEN))
				break;
			combined->written++;
			room--;
		}
	}
}

/*
 * Examine shared buffer 'buf_id' (0-based) and write it if it is valid,
 * dirty, unpinned and has usage count 0 (any usage count with any_usage).
 * With combine_limit > 1, a write takes qualifying neighbours along (their
 * counts are added to *combined).  With 'deferred', a page whose WAL is
 * not flushed yet is put off instead (CLEANER_DEFERRED), and *deferred
 * says which, for bgw_jit_cleaner_sync_deferred() to write it later.
 * Returns CLEANER_* flags for buf_id.
 */
int
bgw_jit_cleaner_sync_buffer(int buf_id, WritebackContext *wb_context,
							bool any_usage, int combine_limit,
							CleanerCombined *combined,
							CleanerDeferred *deferred)
{
	BufferTag	written;
	XLogRecPtr	lsn;
	int			result;

	result = sync_buffer(buf_id, NULL, wb_context, any_usage, &written,
						 deferred != NULL ? &lsn : NULL, false);
	if ((result & CLEANER_WRITTEN) && combine_limit > 1)
		write_neighbours(&written, combine_limit, wb_context, any_usage,
						 deferred != NULL, combined);
	if (result & CLEANER_DEFERRED)
	{
		deferred->tag = written;
		deferred->lsn = lsn;
	}
	return result;
}

/*
 * Write a page bgw_jit_cleaner_sync_buffer() put off, if buffer 'buf_id'
 * still holds it and it still qualifies; with 'defer', put off again (its
 * LSN updated) if its WAL is still not flushed.  Returns CLEANER_* flags.
 */
int
bgw_jit_cleaner_sync_deferred(int buf_id, CleanerDeferred *deferred,
							  bool defer, WritebackContext *wb_context)
{
	BufferTag	written;

#ifdef BGW_JIT_FAULT_INJECTION
	if (bgw_jit_inject_error == BGW_JIT_INJECT_DEFERRED)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("injected error retrying the put-off write of buffer %d",
						buf_id + 1)));
#endif
	return sync_buffer(buf_id, &deferred->tag, wb_context, false, &written,
					   defer ? &deferred->lsn : NULL, false);
}

/*
 * Whether buffer 'buf_id' would be written (valid, dirty, unpinned, usage
 * count 0), without writing it: CLEANER_CLAIMED and the page's tag in
 * *tag, for a writer process (writers.c) to write with
 * bgw_jit_cleaner_write_claimed().  Judges the buffer's mark as a write
 * would.  Returns CLEANER_* flags.
 */
int
bgw_jit_cleaner_claim(int buf_id, BufferTag *tag)
{
	return sync_buffer(buf_id, NULL, NULL, false, tag, NULL, true);
}

/*
 * Write a page claimed by bgw_jit_cleaner_claim(), if buffer 'buf_id'
 * still holds it and it still qualifies.  Returns CLEANER_* flags.
 */
int
bgw_jit_cleaner_write_claimed(int buf_id, const BufferTag *tag,
							  WritebackContext *wb_context)
{
	BufferTag	written;

	return sync_buffer(buf_id, tag, wb_context, false, &written, NULL, false);
}

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
 * Wasted-write accounting: after writing a buffer the worker marks it with
 * a hash of the page's tag (bgw_jit_clean_marks, one uint32 per buffer).
 * The next time any scan meets the buffer the mark is resolved: another
 * page there means the page was evicted clean, so the write spared a
 * backend one (useful), and so does a tag cleared by a backend evicting
 * the page (16+); the same page dirty again, or the page dropped, means
 * the write bought nothing (wasted); the same page still clean leaves it
 * pending.
 *
 * Copyright (c) 2026, bgw_jit developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "executor/instrument.h"
#include "storage/bufmgr.h"
#include "storage/buf_internals.h"

#include "bgw_jit.h"
#include "compat.h"

#define BUF_REUSABLE_STATE(s) \
	(BUF_STATE_GET_REFCOUNT(s) == 0 && BUF_STATE_GET_USAGECOUNT(s) == 0)
#define BUF_VALID_DIRTY(s) \
	(((s) & (BM_VALID | BM_DIRTY)) == (BM_VALID | BM_DIRTY))

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
 * Resolve the mark of a buffer we wrote earlier, from its header as read
 * under the header lock.  Returns CLEANER_USEFUL, CLEANER_WASTED or 0
 * (still pending), clearing the mark once resolved.
 */
static int
resolve_mark(uint32 *mark, BufferDesc *desc, CompatBufState state)
{
	if (!(state & BM_TAG_VALID))
	{
		/*
		 * Being evicted (clean, as we left it): useful.  Otherwise its
		 * relation was dropped or truncated: wasted.
		 */
		*mark = 0;
		return compat_tag_cleared_by_eviction(state) ?
			CLEANER_USEFUL : CLEANER_WASTED;
	}
	if (tag_mark(&desc->tag) != *mark)
	{
		*mark = 0;
		return CLEANER_USEFUL;
	}
	if (state & BM_DIRTY)
	{
		*mark = 0;
		return CLEANER_WASTED;
	}
	return 0;
}

/*
 * Examine shared buffer 'buf_id' (0-based) and write it if it is valid,
 * dirty, unpinned and has usage count 0 (any usage count with any_usage).
 * Returns CLEANER_* flags.  (ReadRecentBuffer makes room in
 * CurrentResourceOwner for its pin.)
 */
int
cleaner_sync_buffer(int buf_id, WritebackContext *wb_context, bool any_usage)
{
	BufferDesc *desc = GetBufferDescriptor(buf_id);
	uint32	   *mark = &bgw_jit_clean_marks[buf_id];
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
	if (!write_candidate(state, any_usage))
	{
		compat_unlock_buf_hdr(desc, state);
		return result;
	}
	tag = desc->tag;
	compat_unlock_buf_hdr(desc, state);

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
#ifdef BGW_JIT_FAULT_INJECTION
	if (bgw_jit_inject_error)
		ereport(ERROR,
				(errmsg("bgw_jit: injected error with buffer %d pinned and locked",
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
		result |= CLEANER_WRITTEN;
	}
	return result;
}

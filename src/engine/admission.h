#pragma once
// Admission by pages: how many pool pages a stream's next chunk takes, and whether the head of the queue may start.
#include "engine/scheduler.h"
#include "engine/stream.h"

namespace fs {

// Pages the stream must add to those it holds to run its next chunk (see next_chunk_length).
int pages_for_next_chunk(const Stream& s, ChunkRule rule, int page_tokens);

// Pages a queued stream must add to those it holds before it is admitted: its next chunk's, or for a stream sent
// back to the queue, all of its known positions' (it was preempted for want of pages; admitted for less, it would
// recompute part of its prefix only to be preempted again).
int pages_to_admit(const Stream& s, ChunkRule rule, int page_tokens);

// Pages an active stream keeps in reserve against admissions: its next chunk's, and at least one while it can still
// grow within `stream_positions` (so a decode row crossing a page edge does not preempt the stream just admitted).
int pages_to_reserve(const Stream& s, ChunkRule rule, int page_tokens, int stream_positions);

// Whether a stream whose next chunk takes `needs` pages may join `active` streams whose next chunks take `reserved`
// pages, with `room` pages free or evictable: at most `parallel` active, and a lone stream always starts (the pool
// holds any prompt that submit accepted).
bool may_admit(int active, int parallel, int room, int reserved, int needs);

}  // namespace fs

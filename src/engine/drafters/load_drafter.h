#pragma once
// Builds the drafter `serve --drafter` / `--draft` name: "ngram" (prompt lookup) or a checkpoint folder whose
// tokenizer must equal the target's (same vocabulary and special ids), run on the target's device (one GPU of a
// split target), its scratch in place before the target sizes its memory budget.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/drafters/drafter.h"
#include "engine/loaded_model.h"

namespace fs {

// Throws fs::Error naming the first difference between the two tokenizers.
void check_same_tokenizer(const LoadedModel& target, const LoadedModel& drafter);

// 16-position pages for a whole context of each of `streams` streams, plus a page each.
int whole_context_pages(int streams, int context);

// K/V pages of a draft model's own pool: a whole context for each of `streams` streams (plus a page each) when that
// fits its share of `free_bytes`, else what the share holds (at least a page per stream). Its share is its part of
// one position's K/V bytes, the drafter's and the target's together, so both pools can hold about as many
// positions; the drafter drops idle streams' K/V, and a stream it has no pages for drafts nothing.
int drafter_pool_pages(size_t drafter_page_bytes, size_t target_page_bytes, int streams, int context,
                       size_t free_bytes);

// `spec` is "ngram" or a folder; `streams` and `context` size a draft model's own K/V pool (drafter_pool_pages of the
// memory free after it loads: the device's, or RAM for a model on the host).
std::shared_ptr<Drafter> load_drafter(const std::string& spec, const LoadedModel& target, int streams, int context);

}  // namespace fs

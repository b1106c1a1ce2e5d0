#pragma once
// Builds the drafter `serve --drafter` / `--draft` name: "ngram" (prompt lookup) or a checkpoint folder whose
// tokenizer must equal the target's (same vocabulary and special ids), run on the target's device (one GPU of a
// split target), its scratch in place before the target sizes its memory budget.
#include <memory>
#include <string>

#include "engine/drafters/drafter.h"
#include "engine/loaded_model.h"

namespace fs {

// Throws fs::Error naming the first difference between the two tokenizers.
void check_same_tokenizer(const LoadedModel& target, const LoadedModel& drafter);

// `spec` is "ngram" or a folder; `streams` and `context` size a draft model's own K/V pool.
std::shared_ptr<Drafter> load_drafter(const std::string& spec, const LoadedModel& target, int streams, int context);

}  // namespace fs

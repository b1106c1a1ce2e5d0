#pragma once
// Speculative-decoding flags of run and serve: --drafter DIR (a small model with the same tokenizer), --draft ngram
// (prompt lookup), --draft-tokens K, --draft-tree W (1..8: the drafter's W choices per depth, verified as a tree).
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace fs::cli {

std::set<std::string> with_draft_flags(std::set<std::string> own);
// Loads the drafter the flags name into `eo` (nothing when none is named); refuses a drafter of another tokenizer.
void apply_draft_options(const Args& args, const LoadedModel& target, EngineOptions& eo);

}  // namespace fs::cli

#include "cli/draft_options.h"

#include "core/error.h"
#include "engine/drafters/load_drafter.h"

namespace fs::cli {

std::set<std::string> with_draft_flags(std::set<std::string> own) {
  own.insert({"drafter", "draft", "draft-tokens"});
  return own;
}

void apply_draft_options(const Args& args, const LoadedModel& target, EngineOptions& eo) {
  const long long k = args.get_int("draft-tokens", eo.draft_tokens);
  if (k < 1 || k > 32) throw Error("--draft-tokens must be between 1 and 32");
  eo.draft_tokens = int(k);
  const auto folder = args.get("drafter");
  const auto kind = args.get("draft");
  if (kind && *kind != "ngram") throw Error("--draft takes 'ngram' (a draft model is --drafter DIR)");
  if (folder && kind) throw Error("--drafter and --draft ngram are alternatives; pick one");
  if (!folder && !kind) {
    if (args.has("draft-tokens")) throw Error("--draft-tokens needs --drafter DIR or --draft ngram");
    return;
  }
  eo.drafter = load_drafter(folder ? *folder : "ngram", target, eo.parallel, eo.context);
  std::fprintf(stderr, "speculative decoding: %s drafts up to %d tokens per round\n", eo.drafter->name(),
               eo.draft_tokens);
}

}  // namespace fs::cli

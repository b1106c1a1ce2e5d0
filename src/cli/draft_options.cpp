#include "cli/draft_options.h"

#include "core/error.h"
#include "engine/drafters/load_drafter.h"

namespace fs::cli {

std::set<std::string> with_draft_flags(std::set<std::string> own) {
  own.insert({"drafter", "draft", "draft-tokens", "draft-tree", "draft-round-rows"});
  return own;
}

void apply_draft_options(const Args& args, const LoadedModel& target, EngineOptions& eo) {
  const long long k = args.get_int("draft-tokens", eo.draft_tokens);
  if (k < 1 || k > 32) throw Error("--draft-tokens must be between 1 and 32");
  eo.draft_tokens = int(k);
  const long long w = args.get_int("draft-tree", eo.draft_tree);
  if (w < 1 || w > 8) throw Error("--draft-tree must be between 1 and 8");
  eo.draft_tree = int(w);
  const long long round_rows = args.get_int("draft-round-rows", target.model->cheap_round_rows());
  if (round_rows < 0 || round_rows > 1 << 20) throw Error("--draft-round-rows must be between 0 (no cap) and 2^20");
  eo.draft_round_rows = int(round_rows);
  const auto folder = args.get("drafter");
  const auto kind = args.get("draft");
  if (kind && *kind != "ngram") throw Error("--draft takes 'ngram' (a draft model is --drafter DIR)");
  if (folder && kind) throw Error("--drafter and --draft ngram are alternatives; pick one");
  if (!folder && !kind) {
    if (args.has("draft-tokens")) throw Error("--draft-tokens needs --drafter DIR or --draft ngram");
    if (args.has("draft-tree")) throw Error("--draft-tree needs --drafter DIR or --draft ngram");
    if (args.has("draft-round-rows")) throw Error("--draft-round-rows needs --drafter DIR or --draft ngram");
    return;
  }
  eo.drafter = load_drafter(folder ? *folder : "ngram", target, eo.parallel, eo.context);
  const std::string tree = eo.draft_tree > 1 ? ", trees of width " + std::to_string(eo.draft_tree) : "";
  const std::string cap = eo.draft_round_rows > 0
                              ? ", while a round holds at most " + std::to_string(eo.draft_round_rows) + " rows"
                              : "";
  std::fprintf(stderr, "speculative decoding: %s drafts up to %d tokens per round%s%s\n", eo.drafter->name(),
               eo.draft_tokens, tree.c_str(), cap.c_str());
}

}  // namespace fs::cli

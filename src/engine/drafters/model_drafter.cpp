#include "engine/drafters/model_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "models/cpu_runner.h"

namespace fs {

ModelDrafter::ModelDrafter(std::unique_ptr<Model> model, std::string name, int pages, bool int8_weights)
    : model_(std::move(model)), name_(std::move(name)) {
  const SequenceMemorySpec spec = model_->memory_spec();
  if (spec.has_state()) throw Error("drafter " + name_ + " carries recurrent state; only attention models draft");
  if (int8_weights) quantize_for_drafting(*model_);
  pool_ = std::make_unique<KvPool>(spec, 16, std::max(pages, 1), 0, model_->kv_on_host());
  model_->attach_pool(*pool_);
}

ModelDrafter::~ModelDrafter() = default;

void ModelDrafter::release(State& s) {
  for (int32_t p : s.pages) pool_->release(p);
  s.pages.clear();
  s.tokens.clear();
}

void ModelDrafter::forget(uint64_t stream) {
  auto it = states_.find(stream);
  if (it == states_.end()) return;
  release(it->second);
  states_.erase(it);
}

bool ModelDrafter::grow(State& s, int positions, std::span<const DraftRequest> keep) {
  const int P = pool_->page_tokens();
  while (int(s.pages.size()) * P < positions) {
    auto page = pool_->allocate();
    while (!page) {
      // The least recently used state of a stream that is not drafting now.
      State* victim = nullptr;
      for (auto& [id, st] : states_) {
        bool busy = std::any_of(keep.begin(), keep.end(), [&](const DraftRequest& r) { return r.stream == id; });
        if (!busy && !st.pages.empty() && (!victim || st.last_used < victim->last_used)) victim = &st;
      }
      if (!victim) return false;
      release(*victim);
      page = pool_->allocate();
    }
    s.pages.push_back(*page);
  }
  return true;
}

namespace {

// The `count` highest logits' ids, highest first (ties: lower id first, as max_element picks).
std::vector<int32_t> top_ids(const float* row, int vocab, int count) {
  if (count == 1) return {int32_t(std::max_element(row, row + vocab) - row)};  // a chain's one guess: no sort
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) ids[size_t(i)] = i;
  count = std::min(count, vocab);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(),
                    [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  ids.resize(size_t(count));
  return ids;
}

}  // namespace

std::vector<std::vector<int32_t>> ModelDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<DraftRequest> chains(requests.begin(), requests.end());
  for (auto& r : chains) r.width = 1;
  std::vector<std::vector<int32_t>> out;
  for (auto& t : propose_trees(chains)) out.push_back(std::move(t.tokens));
  return out;
}

std::vector<DraftTree> ModelDrafter::propose_trees(std::span<const DraftRequest> requests) {
  std::vector<DraftTree> out(requests.size());
  // Per request: the tree node its greedy branch has reached (-1 → the stream's last token) and its depth.
  std::vector<int32_t> branch(requests.size(), -1);
  std::vector<int> depths(requests.size(), 0);
  ++clock_;
  // Per request: the tokens it feeds this depth (catch-up first, then one guess per depth).
  std::vector<std::vector<int32_t>> feed(requests.size());
  std::vector<State*> states(requests.size(), nullptr);
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.max_tokens <= 0 || r.tokens.empty()) continue;
    State& s = states_[r.stream];
    s.last_used = clock_;
    // Keep the longest common prefix; the last token is always fed so there are logits to draft from.
    size_t keep = 0;
    const size_t limit = std::min(s.tokens.size(), r.tokens.size() - 1);
    while (keep < limit && s.tokens[keep] == r.tokens[keep]) ++keep;
    s.tokens.resize(keep);
    if (!grow(s, int(r.tokens.size()) + r.max_tokens - 1, requests)) {
      release(s);
      continue;
    }
    feed[i].assign(r.tokens.begin() + long(keep), r.tokens.end());
    states[i] = &s;
  }
  const int V = model_->config().vocab_size;
  for (;;) {
    std::vector<SequenceChunk> chunks;
    std::vector<size_t> owner;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!states[i] || feed[i].empty() || depths[i] >= requests[i].max_tokens) continue;
      State& s = *states[i];
      SequenceChunk c;
      c.tokens = feed[i];
      c.start_pos = int(s.tokens.size());
      c.pages = s.pages;
      chunks.push_back(c);
      owner.push_back(i);
    }
    if (chunks.empty()) break;
    std::vector<float> logits = model_->forward(chunks, *pool_);
    if (logits.size() != chunks.size() * size_t(V)) throw Error("the drafter returned the wrong number of logit rows");
    for (size_t c = 0; c < owner.size(); ++c) {
      const size_t i = owner[c];
      State& s = *states[i];
      s.tokens.insert(s.tokens.end(), feed[i].begin(), feed[i].end());
      // The greedy guess extends the branch; the next choices become leaves beside it.
      const auto choices = top_ids(logits.data() + c * size_t(V), V, std::max(1, requests[i].width));
      const int32_t parent = branch[i];
      branch[i] = int32_t(out[i].tokens.size());
      for (int32_t id : choices) {
        out[i].tokens.push_back(id);
        out[i].parents.push_back(parent);
      }
      ++depths[i];
      feed[i].assign(1, choices[0]);
    }
  }
  return out;
}

}  // namespace fs

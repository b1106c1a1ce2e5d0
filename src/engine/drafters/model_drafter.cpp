#include "engine/drafters/model_drafter.h"

#include <algorithm>
#include <limits>

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

DrafterMemory ModelDrafter::memory() const {
  DrafterMemory m;
  if (model_->kv_on_host())
    m.host_to_come = size_t(pool_->pages_total()) * model_->kv_page_bytes(pool_->page_tokens());
  else
    m.device_resident = device_bytes_;
  return m;
}

void ModelDrafter::release(State& s) {
  pool_->release(s.pages);
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
        bool busy = std::any_of(keep.begin(), keep.end(), [id = id](const DraftRequest& r) { return r.stream == id; });
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

std::vector<int32_t> top_ids(std::span<const float> row, int count) {
  const int vocab = int(row.size());
  count = std::min(count, vocab);
  if (count <= 0) return {};
  if (count == 1) return {int32_t(std::max_element(row.begin(), row.end()) - row.begin())};  // a chain's one guess
  // One pass keeping the best `count` in order: a later id displaces or passes a kept one only when strictly higher,
  // so equal logits keep the lower id first. Once `count` are kept, blocks whose highest logit is not above the
  // lowest kept one are skipped whole.
  constexpr int kBlock = 16;
  std::vector<int32_t> ids;
  ids.reserve(size_t(count) + 1);
  bool full = false;
  float cut = 0.0f;  // the lowest kept logit once full
  for (int32_t i = 0; i < vocab; ++i) {
    if (full && i % kBlock == 0 && i + kBlock <= vocab) {
      float most = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < kBlock; ++j) most = std::max(most, row[size_t(i + j)]);
      if (!(most > cut)) {
        i += kBlock - 1;
        continue;
      }
    }
    const float v = row[size_t(i)];
    if (full && !(v > cut)) continue;
    auto at = ids.end();
    while (at != ids.begin() && v > row[size_t(*(at - 1))]) --at;
    ids.insert(at, i);
    if (int(ids.size()) > count) ids.pop_back();
    if (int(ids.size()) == count) {
      full = true;
      cut = row[size_t(ids.back())];
    }
  }
  return ids;
}

RowSampling ModelDrafter::row_sampling(int width) const {
  RowSampling r;
  if (width <= 1 && model_->samples_on_device()) r.mode = RowSampling::Mode::Greedy;
  return r;
}

void ModelDrafter::reserve(int streams) {
  // One stream's catch-up filling the forward beside every other stream's one-row step.
  streams = std::max(1, std::min(streams, kMaxFeedRows));
  const int P = pool_->page_tokens();
  const int first = kMaxFeedRows - (streams - 1);
  std::vector<std::vector<int32_t>> pages(static_cast<size_t>(streams));
  const std::vector<int32_t> tokens(static_cast<size_t>(first), 0);
  std::vector<SequenceChunk> chunks;
  auto release_all = [&] {
    for (auto& list : pages) pool_->release(list);
  };
  for (int s = 0; s < streams; ++s) {
    const int rows = s == 0 ? first : 1;
    for (int n = 0; n < (rows + P - 1) / P; ++n) {
      const auto page = pool_->allocate();
      if (!page) {
        release_all();
        return;  // a pool this small never sees so large a forward
      }
      pages[size_t(s)].push_back(*page);
    }
    SequenceChunk c;
    c.tokens = std::span<const int32_t>(tokens.data(), size_t(rows));
    c.pages = pages[size_t(s)];
    chunks.push_back(c);
  }
  const std::vector<RowSampling> sampling(chunks.size(), row_sampling(1));
  (void)model_->forward_sampled(chunks, sampling, *pool_);
  release_all();
}

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
  const int V = model_->config().vocab_size;
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
    // A token past the drafter's embedding (the target's own padding rows) leaves the stream undrafted.
    if (std::any_of(feed[i].begin(), feed[i].end(), [&](int32_t t) { return t < 0 || t >= V; })) {
      release(s);
      feed[i].clear();
      continue;
    }
    states[i] = &s;
  }
  for (;;) {
    std::vector<SequenceChunk> chunks;
    std::vector<RowSampling> sampling;
    std::vector<size_t> owner;
    std::vector<size_t> fed;  // rows of each chunk's feed it takes
    int room = kMaxFeedRows;
    for (size_t i = 0; i < requests.size() && room > 0; ++i) {
      if (!states[i] || feed[i].empty() || depths[i] >= requests[i].max_tokens) continue;
      State& s = *states[i];
      const size_t n = std::min(feed[i].size(), size_t(room));
      room -= int(n);
      SequenceChunk c;
      c.tokens = std::span<const int32_t>(feed[i].data(), n);
      c.start_pos = int(s.tokens.size());
      c.pages = s.pages;
      c.last_logits = n == feed[i].size();  // a catch-up piece before its end drafts nothing
      if (c.last_logits) sampling.push_back(row_sampling(requests[i].width));
      chunks.push_back(c);
      owner.push_back(i);
      fed.push_back(n);
    }
    if (chunks.empty()) break;
    const SampledForward result = model_->forward_sampled(chunks, sampling, *pool_);
    if (result.ids.size() != sampling.size()) throw Error("the drafter returned the wrong number of rows");
    size_t row = 0, logit_row = 0;
    for (size_t c = 0; c < owner.size(); ++c) {
      const size_t i = owner[c];
      State& s = *states[i];
      s.tokens.insert(s.tokens.end(), feed[i].begin(), feed[i].begin() + long(fed[c]));
      feed[i].erase(feed[i].begin(), feed[i].begin() + long(fed[c]));
      if (!chunks[c].last_logits) continue;
      const int32_t picked = result.ids[row++];
      std::vector<int32_t> choices;
      if (picked >= 0) {
        choices.push_back(picked);
      } else {
        if ((logit_row + 1) * size_t(V) > result.logits.size())
          throw Error("the drafter returned the wrong number of logit rows");
        choices = top_ids(std::span<const float>(result.logits.data() + logit_row++ * size_t(V), size_t(V)),
                          std::max(1, requests[i].width));
      }
      // The greedy guess extends the branch; the next choices become leaves beside it.
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

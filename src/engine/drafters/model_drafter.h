#pragma once
// Drafting with a small model of the same tokenizer, on the target's device: on the CPU with approximate int8
// weights where they fit (quantize_for_drafting: a guess only needs the top choices, and a smaller drafter leaves
// the cache to the target; the target checks every guess, so replies keep their bits), on a GPU with its own bf16
// weights and its chains' guesses picked on the device. It keeps K/V of each stream's tokens in its own pool,
// catches up on what the stream kept since the last round (rolling back to the longest common prefix, so rejected
// guesses leave nothing behind; at most kMaxFeedRows rows a forward) and proposes its greedy continuation, all
// streams batched per depth. A tree of width W is that greedy branch with the W - 1 next choices at each depth as
// leaves beside it: no extra drafter steps, at most W · depth nodes.
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/drafters/drafter.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

// The `count` highest logits' ids, highest first; equal logits keep the lower id first (as max_element picks).
std::vector<int32_t> top_ids(std::span<const float> row, int count);

class ModelDrafter final : public Drafter {
 public:
  // `pages` of the drafter's own pool (16 positions each); streams' K/V are dropped, oldest first, when it runs dry.
  // `int8_weights` false keeps the model's own weights (benchmarks compare the two).
  ModelDrafter(std::unique_ptr<Model> model, std::string name, int pages, bool int8_weights = true);
  ~ModelDrafter() override;
  // Rows of one drafter forward at most: a long catch-up runs in pieces.
  static constexpr int kMaxFeedRows = 512;
  // Runs the largest forward `streams` streams make, so a device model holds its scratch for it before the
  // target measures the memory left for its own budget.
  void reserve(int streams);
  const char* name() const override { return name_.c_str(); }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override;
  std::vector<DraftTree> propose_trees(std::span<const DraftRequest> requests) override;
  void forget(uint64_t stream) override;
  // On the host: its K/V pool, touched page by page; on a device: what loading and reserve() took there.
  DrafterMemory memory() const override;
  void set_device_bytes(size_t bytes) { device_bytes_ = bytes; }
  const Model& model() const { return *model_; }

 private:
  struct State {
    std::vector<int32_t> tokens;  // tokens whose K/V are in `pages`, positions 0..tokens.size()-1
    std::vector<int32_t> pages;
    uint64_t last_used = 0;
  };
  // Grows the state's pages to `positions`, dropping idle streams' states when the pool is empty.
  bool grow(State& s, int positions, std::span<const DraftRequest> keep);
  void release(State& s);
  // How the drafter wants a depth's logit row back: a chain's one guess picked on the device where it can.
  RowSampling row_sampling(int width) const;

  std::unique_ptr<Model> model_;
  std::string name_;
  std::unique_ptr<KvPool> pool_;
  std::unordered_map<uint64_t, State> states_;
  uint64_t clock_ = 0;
  size_t device_bytes_ = 0;
};

}  // namespace fs

#include "backends/cuda/kernels/tensor_parallel_model.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/pass_watchdog.h"
#include "backends/cuda/host/rank_workers.h"
#include "backends/cuda/host/tensor_parallel_group.h"
#include "backends/cuda/host/tensor_parallel_pass.h"
#include "backends/cuda/kernels/cuda_model.h"
#include "backends/cuda/kernels/rank_sum_ops.h"
#include "core/error.h"
#include "models/kv_pool.h"
#include "models/model_program.h"
#include "models/tensor_parallel_plan.h"

namespace fs {

namespace {

std::vector<int> first_devices(int ranks) {
  const int visible = cuda::visible_device_count();
  if (ranks > visible)
    throw Error("tensor parallelism over " + std::to_string(ranks) + " GPUs needs " + std::to_string(ranks) +
                " GPUs; this machine has " + std::to_string(visible));
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(r);
  return devices;
}

class TensorParallelModel final : public Model {
 public:
  TensorParallelModel(const ModelConfig& c, std::shared_ptr<Checkpoint> ck, int ranks,
                      const cuda::SyntheticSpread* spread)
      : config_(c),
        program_(model_program(c, ck.get())),
        deadline_(cuda::pass_deadline_from_env()),
        workers_(ranks),
        runners_(size_t(ranks)) {
    std::vector<int> devices = first_devices(ranks);
    const TensorParallelPlan plan = tensor_parallel_plan(program_, ranks);
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off unless the user asks for it
    group_ = std::make_unique<cuda::TensorParallelGroup>(
        std::move(devices), [](const float* gathered, int count, size_t n, float* out, cuda::CUstream stream) {
          cuda::kernels::rank_sum(gathered, count, n, out, stream);
        });
    workers_.run([&](int r) {
      const RunnerPlacement where{group_->device(r), group_.get(), r};
      runners_[size_t(r)] = create_cuda_runner(c, shard_program(program_, plan, r), ck, spread, where);
    });
  }

  ~TensorParallelModel() override {
    try {
      workers_.run([&](int r) { runners_[size_t(r)].reset(); });
    } catch (...) {
    }
  }

  const ModelConfig& config() const override { return config_; }
  SequenceMemorySpec memory_spec() const override { return program_.memory; }
  const char* device_name() const override { return "cuda"; }
  bool kv_on_host() const override { return false; }
  bool samples_on_device() const override { return first().samples_on_device(); }
  int cheap_round_rows() const override { return first().cheap_round_rows(); }
  bool supports_row_parents() const override { return first().supports_row_parents(); }
  int prompt_alignment() const override { return first().prompt_alignment(); }
  // Per GPU: a rank's weights, page bytes and scratch; the least free memory of any rank.
  size_t weight_bytes() const override { return first().weight_bytes(); }
  size_t kv_page_bytes(int page_tokens) const override { return first().kv_page_bytes(page_tokens); }
  size_t round_scratch_bytes(const RoundLimits& limits) const override { return first().round_scratch_bytes(limits); }
  std::optional<size_t> device_memory_free() const override {
    std::optional<size_t> least;
    for (const auto& r : runners_) {
      const auto free = r->device_memory_free();
      if (free && (!least || *free < *least)) least = free;
    }
    return least;
  }

  void attach_pool(KvPool& pool) override {
    on_all([&](Model& m, int) { m.attach_pool(pool); });
  }

  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    std::vector<float> logits;
    on_all([&](Model& m, int r) {
      auto mine = m.forward(chunks, pool);
      if (r == 0) logits = std::move(mine);
    });
    return logits;
  }

  SampledForward forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                 KvPool& pool) override {
    SampledForward out;
    on_all([&](Model& m, int r) {
      auto mine = m.forward_sampled(chunks, rows, pool);
      if (r == 0) out = std::move(mine);
    });
    return out;
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    std::vector<float> states;
    on_all([&](Model& m, int r) {
      auto mine = m.hidden_states(chunk, pool);
      if (r == 0) states = std::move(mine);
    });
    return states;
  }

  void copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) override {
    on_all([&](Model& m, int) { m.copy_kv_positions(pool, from, to, positions); });
  }

  void move_kv_row(KvPool& pool, std::span<const int32_t> pages, int from, int to) override {
    on_all([&](Model& m, int) { m.move_kv_row(pool, pages, from, to); });
  }

  // A page's rows hold every rank's K/V heads side by side; each rank keeps its columns.
  void save_kv_page(KvPool& pool, int32_t page, float* dst) override {
    const size_t share = size_t(pool.row_floats()) / runners_.size();
    on_all([&](Model& m, int r) {
      std::vector<float> mine(pool.page_floats() / runners_.size());
      m.save_kv_page(pool, page, mine.data());
      for (size_t row = 0; row * share < mine.size(); ++row)
        std::copy_n(mine.data() + row * share, share, dst + row * size_t(pool.row_floats()) + size_t(r) * share);
    });
  }

  void load_kv_page(KvPool& pool, int32_t page, const float* src) override {
    const size_t share = size_t(pool.row_floats()) / runners_.size();
    on_all([&](Model& m, int r) {
      std::vector<float> mine(pool.page_floats() / runners_.size());
      for (size_t row = 0; row * share < mine.size(); ++row)
        std::copy_n(src + row * size_t(pool.row_floats()) + size_t(r) * share, share, mine.data() + row * share);
      m.load_kv_page(pool, page, mine.data());
    });
  }

  // A sequence's state is the ranks' shares one after another.
  void save_state(KvPool& pool, int32_t slot, float* dst) override {
    on_all([&](Model& m, int r) { m.save_state(pool, slot, dst + state_share(pool) * size_t(r)); });
  }

  void load_state(KvPool& pool, int32_t slot, const float* src) override {
    on_all([&](Model& m, int r) { m.load_state(pool, slot, src + state_share(pool) * size_t(r)); });
  }

  int state_snapshot_pages(const KvPool& pool) const override { return first().state_snapshot_pages(pool); }

  void write_state_pages(KvPool& pool, std::span<const int32_t> pages, const float* state) override {
    on_all([&](Model& m, int r) { m.write_state_pages(pool, pages, state + state_share(pool) * size_t(r)); });
  }

  void state_to_pages(KvPool& pool, int32_t slot, std::span<const int32_t> pages) override {
    on_all([&](Model& m, int) { m.state_to_pages(pool, slot, pages); });
  }

  void pages_to_state(KvPool& pool, std::span<const int32_t> pages, int32_t slot) override {
    on_all([&](Model& m, int) { m.pages_to_state(pool, pages, slot); });
  }

  void read_state_pages(KvPool& pool, std::span<const int32_t> pages, float* state) override {
    on_all([&](Model& m, int r) { m.read_state_pages(pool, pages, state + state_share(pool) * size_t(r)); });
  }

 private:
  const Model& first() const { return *runners_.front(); }
  size_t state_share(const KvPool& pool) const { return pool.state_floats() / runners_.size(); }

  void on_all(const std::function<void(Model&, int)>& job) {
    cuda::run_tensor_parallel(workers_, *group_, [&](int r) { job(*runners_[size_t(r)], r); }, deadline_);
  }

  ModelConfig config_;
  ModelProgram program_;
  cuda::PassDeadline deadline_;
  cuda::RankWorkers workers_;
  std::unique_ptr<cuda::TensorParallelGroup> group_;
  std::vector<std::unique_ptr<Model>> runners_;
};

}  // namespace

std::unique_ptr<Model> create_tensor_parallel_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint,
                                                    int ranks, const cuda::SyntheticSpread* spread) {
  return std::make_unique<TensorParallelModel>(config, std::move(checkpoint), ranks, spread);
}

}  // namespace fs

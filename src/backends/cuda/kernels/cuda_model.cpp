// The CUDA runner: a family's program on a CUDA device, weights uploaded once as 16-bit floats, K/V in device pages
// indexed by the engine's page ids, one stream; every kernel's per-row arithmetic is independent of the batch.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/decode_buckets.h"
#include "backends/cuda/host/env_switch.h"
#include "backends/cuda/host/graph.h"
#include "backends/cuda/host/round_collectives.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/cuda_model.h"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/device_state_slots.h"
#include "backends/cuda/kernels/device_weights.h"
#include "backends/cuda/kernels/gated_attention_ops.h"
#include "backends/cuda/kernels/ops.h"
#include "backends/cuda/kernels/tensor_parallel_ops.h"
#include "backends/cuda/kernels/sample_ops.h"
#include "backends/cuda/kernels/state_page_ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/recycled_floats.h"
#include "io/safetensors.h"
#include "models/forward_rows.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/model_program.h"
#include "models/rotary_angle_cache.h"

namespace fs {

namespace {

using cuda::CUdeviceptr;
namespace k = cuda::kernels;

template <typename T>
T* at(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

constexpr size_t kPinnedLimit = size_t{256} << 20;
constexpr size_t kStageBytes = size_t{32} << 20;

constexpr int kSampleWords = int(sizeof(k::SampleRow) / 4);
static_assert(k::kMaxTopLogprobs == kMaxTopLogprobs, "the device records hold every top logprob a row may ask for");

// Row bookkeeping of one forward pass, uploaded as one block laid out by cuda::meta_layout.
struct Plan : cuda::PassRows {
  int logit_rows = 0;
  bool decode_only = true;  // every chunk is one token with its logits
  int lone_rows = 0;        // leading rows that are each a chunk of one row, not a tree row
  std::vector<std::pair<int, const float*>> image_rows;
  cuda::StateRows state;  // models with recurrent layers: each chunk's sequence and snapshots
};

k::SampleRow sample_row(const RowSampling& r) {
  k::SampleRow s;
  s.mode = int32_t(r.mode);
  s.top_k = r.top_k;
  s.temperature = r.temperature;
  s.top_p = r.top_p;
  s.min_p = r.min_p;
  s.uniform = std::min(float(r.uniform), 0x1.fffffep-1f);
  if (!(s.uniform >= 0.0f)) s.uniform = 0.0f;
  s.logprobs = r.logprobs < 0 ? -1 : std::min(r.logprobs, k::kMaxTopLogprobs);
  return s;
}

class CudaModel final : public Model {
 public:
  // `program` on the placement's device; weights from the checkpoint, or made on the device from `spread` when there
  // is none. Under tensor parallelism the program is the rank's shard.
  CudaModel(const ModelConfig& c, ModelProgram program, std::shared_ptr<Checkpoint> ck,
            const cuda::SyntheticSpread* spread, const RunnerPlacement& where)
      : config_(c),
        ck_(std::move(ck)),
        where_(where),
        device_(where.device),
        pinned_(kPinnedLimit),
        stage_(pinned_, kStageBytes, "CUDA upload stage"),
        downloader_(device_, pinned_),
        graphs_on_(cuda::switched_on("FOLDSERVE_CUDA_GRAPHS")),  // graphs for decode rounds unless set to 0
        program_(std::move(program)),
        states_(program_.memory.state_floats) {
    check_runnable(program_);
    chunked_prompts_ = has_state() && std::all_of(program_.layers.begin(), program_.layers.end(), [](const auto& L) {
      return !L.deltanet || k::deltanet_chunked_takes(L.deltanet->shape);
    });
    weights_ = spread ? cuda::synthesize_weights(program_, *spread, stream_.handle())
                      : cuda::upload_weights(program_, *ck_, stage_, stream_.handle());
    stream_.synchronize();
  }

  ~CudaModel() override {
    try {
      stream_.synchronize();
    } catch (...) {
    }
  }

  const ModelConfig& config() const override { return config_; }
  SequenceMemorySpec memory_spec() const override { return program_.memory; }
  size_t weight_bytes() const override { return weights_.matrix_bytes; }
  bool kv_on_host() const override { return false; }
  const char* device_name() const override { return "cuda"; }

  // Per attending layer, keys then values: page_tokens rows of kv_heads × head_dim bf16 each.
  size_t kv_page_bytes(int page_tokens) const override {
    return size_t(kv_layers()) * 2 * size_t(page_tokens) * row_bytes();
  }

  std::optional<size_t> device_memory_free() const override {
    device_.make_current();
    return device_.free_bytes();
  }

  // The eager arena grown to the largest round (and the quarter it adds), the decode graphs' fixed buffers, and the
  // padding page the pool holds beyond the engine's.
  size_t round_scratch_bytes(const RoundLimits& r) const override {
    const auto L = cuda::meta_layout(r.rows, r.logit_rows, rotary_half(), kSampleWords);
    const size_t eager = scratch_need(scratch_sizes(r.rows, r.logit_rows, L.words(r.page_entries) * 4));
    const size_t graphs = graphs_on_ ? scratch_need(decode_scratch_sizes(size_t(r.pool_pages))) : 0;
    return eager + eager / 4 + graphs + kv_page_bytes(r.page_tokens) +
           split_bytes(size_t(r.pool_pages) * size_t(r.page_tokens));
  }

  // Attention's split scratch for a pool of `slots` key slots: a chunk record for every kSplitKeys keys of the pool
  // and each of 64 rows (a verify window's rows of one long stream may need more; those rows then run their chunks
  // in one CTA), and the arrival counters.
  size_t split_records(size_t slots) const { return slots / size_t(k::kSplitKeys) + size_t(cuda::kMaxDecodeBucket); }
  size_t split_record_floats() const {
    size_t most = 0;
    for (const LayerProgram& L : program_.layers)
      if (const auto& a = L.attention)
        most = std::max(most, k::attention_record_floats(k::HeadShape{a->heads, a->kv_heads, a->head_dim}));
    return most;
  }
  size_t split_counter_bytes() const {
    size_t heads = 0;
    for (const LayerProgram& L : program_.layers)
      if (L.attention) heads = std::max(heads, size_t(L.attention->heads));
    return size_t(cuda::kMaxDecodeBucket) * heads * sizeof(int32_t);
  }
  size_t split_bytes(size_t slots) const {
    if (split_record_floats() == 0) return 0;
    return split_records(slots) * split_record_floats() * sizeof(float) + split_counter_bytes() + 1024;
  }

  // The device pool holds one page more than the engine's: the page padded decode rows write to.
  void attach_pool(KvPool& pool) override {
    device_.make_current();
    const size_t slots = size_t(pool.pages_total() + 1) * size_t(pool.page_tokens());
    if (pool.layers() != kv_layers() || pool.row_floats() != row_floats() * ranks())
      throw Error("the KV pool is not laid out for this model's attention layers");
    const size_t bytes = size_t(kv_layers()) * 2 * slots * row_bytes();
    if (!kv_ || kv_->capacity() < bytes) {
      stream_.synchronize();
      kv_.reset();
      kv_ = std::make_unique<cuda::DeviceArena>(bytes, "KV cache");
      kv_base_ = kv_->allocate(bytes, "KV pages").ptr;
    }
    if (has_state()) {
      if (pool.state_floats() != state_floats() * size_t(ranks()))
        throw Error("the pool's state slots do not fit this model's recurrent state");
      stream_.synchronize();
      states_.attach(pool.state_slots_total());
    }
    attach_split(size_t(pool.pages_total()) * size_t(pool.page_tokens()));
    stream_.synchronize();
    for (auto& g : graphs_) g.reset();
    decode_scratch_.reset();
    attached_ = &pool;
    slots_ = slots;
    pool_slots_ = size_t(pool.pages_total()) * size_t(pool.page_tokens());
    dummy_page_ = pool.pages_total();
    page_tokens_ = pool.page_tokens();
    if (graphs_on_) capture_decode_graphs();
  }

  // Places attention's split scratch for a pool of `slots` key slots, counters zeroed.
  void attach_split(size_t slots) {
    const size_t bytes = split_bytes(slots);
    if (bytes == 0) return;
    if (!split_arena_ || split_arena_->capacity() < bytes) {
      stream_.synchronize();
      split_arena_.reset();
      split_arena_ = std::make_unique<cuda::DeviceArena>(bytes, "attention split scratch");
    }
    split_arena_->release_to(0);
    const CUdeviceptr counters = split_arena_->allocate(split_counter_bytes(), "attention split counters").ptr;
    const size_t records = split_records(slots);
    split_.records = at<float>(split_arena_->allocate(records * split_record_floats() * sizeof(float),
                                                      "attention chunk records").ptr);
    split_.record_capacity = int(std::min<size_t>(records, size_t(INT32_MAX)));
    split_.counters = at<int32_t>(counters);
    FS_CU(memset_d8_async, counters, 0, split_counter_bytes(), stream_.handle());
  }

  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    return run(chunks, pool, nullptr, {}).logits;
  }

  bool samples_on_device() const override { return config_.vocab_size <= k::kMaxSampleVocab; }
  // The few-row GEMMs stream each weight once for up to this many rows.
  int cheap_round_rows() const override { return 16; }
  // Tree rows attend along their parents (attention's PagedKv::row_tree); recurrent layers run rows in order.
  bool supports_row_parents() const override { return !has_state(); }
  // Prompt rows of a model with DeltaNet layers take the delta rule's chunked form, in chunks at multiples of 16.
  int prompt_alignment() const override { return chunked_prompts_ ? kChunkRows : 1; }

  SampledForward forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                 KvPool& pool) override {
    return run(chunks, pool, nullptr, rows);
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    std::vector<float> states;
    run(std::span<const SequenceChunk>(&chunk, 1), pool, &states, {});
    return states;
  }

  void copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) override {
    ensure_pool(pool);
    const size_t n = size_t(positions) * row_bytes();
    for (int l = 0; l < kv_layers(); ++l)
      for (int side = 0; side < 2; ++side)
        FS_CU(memcpy_dtod_async, side_base(l, side) + size_t(to) * page_tokens_ * row_bytes(),
              side_base(l, side) + size_t(from) * page_tokens_ * row_bytes(), n, stream_.handle());
  }

  void move_kv_row(KvPool& pool, std::span<const int32_t> pages, int from, int to) override {
    ensure_pool(pool);
    const int P = page_tokens_;
    const size_t at_from = size_t(pages[size_t(from / P)]) * P + size_t(from % P);
    const size_t at_to = size_t(pages[size_t(to / P)]) * P + size_t(to % P);
    for (int l = 0; l < kv_layers(); ++l)
      for (int side = 0; side < 2; ++side)
        FS_CU(memcpy_dtod_async, side_base(l, side) + at_to * row_bytes(), side_base(l, side) + at_from * row_bytes(),
              row_bytes(), stream_.handle());
  }

  void save_kv_page(KvPool& pool, int32_t page, float* dst) override {
    ensure_pool(pool);
    const size_t n = size_t(page_tokens_) * size_t(row_floats());
    std::vector<uint16_t> bits(n);
    for (int l = 0; l < kv_layers(); ++l)
      for (int side = 0; side < 2; ++side) {
        downloader_.download(bits.data(), side_base(l, side) + size_t(page) * page_tokens_ * row_bytes(), n * 2,
                             stream_.handle());
        for (size_t i = 0; i < n; ++i) *dst++ = bf16_to_f32(bits[i]);
      }
  }

  void save_state(KvPool& pool, int32_t slot, float* dst) override {
    ensure_pool(pool);
    states_.save(slot, dst, downloader_, stream_.handle());
  }

  void load_state(KvPool& pool, int32_t slot, const float* src) override {
    ensure_pool(pool);
    states_.load(slot, src, stage_, stream_.handle());
  }

  // A snapshot is the state's f32 bytes laid over the pages' K/V bytes in order, so it comes back bit for bit.
  int state_snapshot_pages(const KvPool& pool) const override {
    const size_t page = kv_page_bytes(pool.page_tokens()), bytes = state_floats() * sizeof(float);
    return page == 0 ? 0 : int((bytes + page - 1) / page);
  }

  void write_state_pages(KvPool& pool, std::span<const int32_t> pages, const float* state) override {
    ensure_pool(pool);
    const auto* src = reinterpret_cast<const unsigned char*>(state);
    for_state_bytes(pool, pages, [&](CUdeviceptr at, size_t offset, size_t n) {
      stage_.upload(at, src + offset, n, stream_.handle());
    });
  }

  void read_state_pages(KvPool& pool, std::span<const int32_t> pages, float* state) override {
    ensure_pool(pool);
    auto* dst = reinterpret_cast<unsigned char*>(state);
    for_state_bytes(pool, pages, [&](CUdeviceptr at, size_t offset, size_t n) {
      downloader_.download(dst + offset, at, n, stream_.handle());
    });
  }

  void state_to_pages(KvPool& pool, int32_t slot, std::span<const int32_t> pages) override {
    copy_state_pages(pool, states_.base() + states_.slot_floats(slot), pages, true);
  }

  void pages_to_state(KvPool& pool, std::span<const int32_t> pages, int32_t slot) override {
    copy_state_pages(pool, states_.base() + states_.slot_floats(slot), pages, false);
  }

  void load_kv_page(KvPool& pool, int32_t page, const float* src) override {
    ensure_pool(pool);
    const size_t n = size_t(page_tokens_) * size_t(row_floats());
    std::vector<uint16_t> bits(n);
    for (int l = 0; l < kv_layers(); ++l)
      for (int side = 0; side < 2; ++side) {
        for (size_t i = 0; i < n; ++i) bits[i] = f32_to_bf16(*src++);
        stage_.upload(side_base(l, side) + size_t(page) * page_tokens_ * row_bytes(), bits.data(), n * 2,
                      stream_.handle());
      }
  }

 private:
  // The steps this runner has kernels for; anything else is refused naming the step.
  static void check_runnable(const ModelProgram& p) {
    for (const LayerProgram& L : p.layers)
      if (L.attention && !L.attention->output_gate && L.attention->rotary_dim != L.attention->head_dim)
        throw Error("the CUDA runner has no kernel for partial rotary without an output gate (" + p.family + ")");
  }

  bool has_state() const { return program_.memory.has_state(); }
  static constexpr int kChunkRows = 16;  // rows of the delta rule's chunked form (deltanet_recurrence_chunked)

  int kv_layers() const { return program_.memory.kv_layers; }
  int ranks() const { return where_.ranks(); }
  bool parallel() const { return where_.group != nullptr; }
  // This runner's share of a KV row and of a sequence's state.
  int row_floats() const { return program_.memory.kv_heads * program_.memory.head_dim; }
  size_t state_floats() const { return program_.memory.state_floats; }
  int rotary_half() const { return program_.rotary.rotary_dim / 2; }
  size_t row_bytes() const { return size_t(row_floats()) * 2; }
  CUdeviceptr side_base(int layer, int side) const {
    return kv_base_ + (size_t(layer) * 2 + size_t(side)) * slots_ * row_bytes();
  }

  void ensure_pool(KvPool& pool) {
    device_.make_current();
    if (attached_ != &pool || pool_slots_ != size_t(pool.pages_total()) * size_t(pool.page_tokens())) attach_pool(pool);
  }

  // Calls each(device address, offset into the state's bytes, bytes) over the pages' per-layer K and V runs in
  // order until the state's bytes are covered.
  template <typename Each>
  void for_state_bytes(const KvPool& pool, std::span<const int32_t> pages, Each each) const {
    const size_t total = state_floats() * sizeof(float), run = size_t(page_tokens_) * row_bytes();
    size_t offset = 0;
    for (int32_t page : pages)
      for (int l = 0; l < kv_layers() && offset < total; ++l)
        for (int side = 0; side < 2 && offset < total; ++side) {
          const size_t n = std::min(run, total - offset);
          each(side_base(l, side) + size_t(page) * run, offset, n);
          offset += n;
        }
    if (offset < total) throw Error("a state snapshot needs more pages than it was given");
  }

  // A device state into snapshot pages (laid out as for_state_bytes walks them) or back, on the device.
  void copy_state_pages(KvPool& pool, float* state, std::span<const int32_t> pages, bool to_pages) {
    ensure_pool(pool);
    copy_state_pages(state, pages.size(), states_.page_list(pages, stage_, stream_.handle()), to_pages);
  }

  // The same with the page ids already in a device list.
  void copy_state_pages(float* state, size_t page_count, const int32_t* device_pages, bool to_pages) {
    const size_t bytes = state_floats() * sizeof(float), run = size_t(page_tokens_) * row_bytes();
    const size_t sides = size_t(2 * kv_layers());
    if (run == 0 || page_count * sides * run < bytes)
      throw Error("a state snapshot needs more pages than it was given");
    k::copy_state_pages(state, bytes, at<unsigned char>(kv_base_), slots_ * row_bytes(), int(sides), run, device_pages,
                        to_pages, stream_.handle());
  }

  // The pass's snapshots that go into pages, from the device snapshot buffer, all page ids in one list.
  void snapshots_into_pages(const cuda::StateRows& rows, float* snapshots) {
    std::vector<int32_t> all;
    for (const auto& pages : rows.tap_pages) all.insert(all.end(), pages.begin(), pages.end());
    if (all.empty()) return;
    const int32_t* list = states_.page_list(all, stage_, stream_.handle());
    for (size_t t = 0; t < rows.tap_pages.size(); ++t) {
      const size_t n = rows.tap_pages[t].size();
      if (n > 0) copy_state_pages(snapshots + t * state_floats(), n, list, true);
      list += n;
    }
  }

  Plan plan(std::span<const SequenceChunk> chunks) const {
    Plan p;
    const int P = page_tokens_;
    if (has_state()) check_state_chunks(chunks);
    for (const SequenceChunk& ch : chunks) {
      check_chunk_fits(ch, P);
      if (has_state()) {
        p.state.add_chunk(ch, p.rows, states_.slot_floats(ch.state_slot), state_floats(),
                          size_t(where_.rank) * state_floats(), chunked_prompts_ && ch.prompt);
      }
      for (int32_t page : ch.pages)
        if (page < 0 || size_t(page) * size_t(P) >= pool_slots_) throw Error("KV page id outside the pool");
      const int32_t table = int32_t(p.pages.size()), first_row = p.rows;
      p.pages.insert(p.pages.end(), ch.pages.begin(), ch.pages.end());
      for (const ChunkRow& row : chunk_rows(ch, config_)) {
        if (row.logits) p.logits.push_back(p.rows);
        else p.decode_only = false;
        if (row.image) {
          p.image_rows.emplace_back(p.rows, row.image);
          p.decode_only = false;
        }
        const int pos = row.position;
        const bool tree = !ch.row_parents.empty();
        p.tokens.push_back(row.token);
        p.slot.push_back(ch.pages[size_t(pos / P)] * P + pos % P);
        p.keys.push_back(ch.start_pos + row.depth + 1);  // a chain row's depth is its index: its position + 1
        p.table.push_back(table);
        p.tree.push_back(tree ? ch.start_pos + 1 : 0);
        const int32_t parent = tree ? ch.row_parents[size_t(p.rows - first_row)] : -1;
        p.parent.push_back(parent < 0 ? -1 : first_row + parent);
        p.rope_positions.insert(p.rope_positions.end(), row.rope, row.rope + 3);
        ++p.rows;
      }
      if (ch.tokens.size() != 1) p.decode_only = false;
      if (p.lone_rows == first_row && p.rows == first_row + 1 && ch.row_parents.empty()) p.lone_rows = p.rows;
    }
    p.logit_rows = int(p.logits.size());
    return p;
  }

  // Device buffers of one pass: activations for T rows, logits and ids for R logit rows, the metadata block.
  // act: bf16 input of o/down/out GEMMs; qkv: a mixer's projection; q: attention queries or the conv output;
  // gu: the attention output gate or the DeltaNet core output; desc: DeltaNet sequence descriptors.
  struct Scratch {
    CUdeviceptr x, xn, act, qkv, q, gu, states, lastn, logits, ids, meta, desc;
    CUdeviceptr partial, gathered, part_logits;  // tensor parallelism: a rank's partial sums and the ranks' gathered
    CUdeviceptr logprobs;                        // a k::LogprobRecord per logit row
    CUdeviceptr prep;                            // the chunked delta rule's state-free part
  };

  // The widest buffer each mixer needs per row over the program's layers (floats or bf16 elements).
  struct Widths {
    size_t act = 0, qkv = 0, q = 0, gu = 0;
  };
  Widths widths() const {
    Widths w;
    for (const LayerProgram& L : program_.layers) {
      const size_t F = size_t(L.mlp.gate.rows());
      w.act = std::max(w.act, F);  // the MLP's gate|up GEMM writes its SwiGLU straight into act
      if (const auto& a = L.attention) {
        const size_t Q = size_t(a->heads) * size_t(a->head_dim);
        w.act = std::max(w.act, Q);
        w.qkv = std::max(w.qkv, size_t(a->qkv.rows()));
        w.q = std::max(w.q, Q);
        w.gu = std::max(w.gu, Q);
      }
      if (const auto& d = L.deltanet) {
        const DeltaNetShape& s = d->shape;
        const size_t C = size_t(s.conv_channels()), V = size_t(s.value_channels());
        w.act = std::max(w.act, V);
        w.qkv = std::max(w.qkv, C + V + 2 * size_t(s.value_heads));
        w.q = std::max(w.q, C);
        w.gu = std::max(w.gu, V);
      }
    }
    return w;
  }

  std::vector<size_t> scratch_sizes(int T, int R, size_t meta_bytes) const {
    const ModelConfig& c = config_;
    const Widths w = widths();
    const size_t H = size_t(c.hidden_size);
    const size_t t = size_t(T), r = size_t(R);
    return {t * H * 4,       t * H * 2,          t * w.act * 2,
            t * w.qkv * 4,   t * w.q * 4,        t * w.gu * 4,
            t * H * 4,       r * H * 2,          r * size_t(c.vocab_size) * 4,
            r * 4,           meta_bytes,         has_state() ? cuda::StateRows::descriptor_bytes(T) : 0,
            parallel() ? t * H * 4 : 0,
            parallel() ? size_t(ranks()) * std::max(t * H, r * head_rows()) * 4 : 0,
            parallel() ? r * head_rows() * 4 : 0,
            r * sizeof(k::LogprobRecord),
            chunked_prep_bytes(T)};
  }

  // The chunked delta rule's scratch for a pass of T rows: every chunk of its prompt sequences (at most one a state
  // slot) for the widest DeltaNet layer.
  size_t chunked_prep_bytes(int T) const {
    size_t most = 0;
    if (chunked_prompts_)
      for (const LayerProgram& L : program_.layers)
        if (L.deltanet)
          most = std::max(most, k::deltanet_chunked_prep_floats(T, states_.slots() + 1, L.deltanet->shape) * 4);
    return most;
  }

  static size_t scratch_need(const std::vector<size_t>& sizes) {
    size_t need = 0;
    for (size_t s : sizes) need += (std::max<size_t>(s, 16) + 255) / 256 * 256 + 256;
    return need;
  }

  static Scratch carve(cuda::DeviceArena& arena, const std::vector<size_t>& sizes) {
    arena.release_to(0);
    CUdeviceptr p[17];
    for (size_t i = 0; i < sizes.size(); ++i) p[i] = arena.allocate(std::max<size_t>(sizes[i], 16), "scratch").ptr;
    return {p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7], p[8],
            p[9], p[10], p[11], p[12], p[13], p[14], p[15], p[16]};
  }

  // Scratch of an eager pass, grown when a pass needs more.
  Scratch scratch(int T, int R, size_t meta_bytes) {
    const auto sizes = scratch_sizes(T, R, meta_bytes);
    const size_t need = scratch_need(sizes);
    if (!scratch_ || scratch_->capacity() < need) {
      stream_.synchronize();
      scratch_.reset();
      scratch_ = std::make_unique<cuda::DeviceArena>(need + need / 4, "activation scratch");
    }
    return carve(*scratch_, sizes);
  }

  // Page-table entries a decode round may upload: every row's table plus the padding page.
  static size_t decode_page_capacity(size_t pool_pages) { return size_t(cuda::kMaxDecodeBucket) * pool_pages + 1; }
  size_t decode_page_capacity() const { return decode_page_capacity(pool_slots_ / size_t(page_tokens_)); }

  // Scratch and metadata of the largest decode bucket over a pool of `pool_pages` pages.
  std::vector<size_t> decode_scratch_sizes(size_t pool_pages) const {
    const int B = cuda::kMaxDecodeBucket;
    const auto L = cuda::meta_layout(B, B, rotary_half(), kSampleWords);
    return scratch_sizes(B, B, L.words(decode_page_capacity(pool_pages)) * 4);
  }

  // The fixed buffers every decode graph reads: scratch and metadata for the largest bucket, made once per pool.
  const Scratch& decode_scratch() {
    if (!decode_scratch_) {
      const auto sizes = decode_scratch_sizes(pool_slots_ / size_t(page_tokens_));
      decode_scratch_ = std::make_unique<cuda::DeviceArena>(scratch_need(sizes), "decode graph scratch");
      decode_ = carve(*decode_scratch_, sizes);
    }
    return decode_;
  }

  // The metadata block of a pass: row arrays, sampling requests (rows without one stay mode 0), cos/sin, pages.
  std::vector<uint32_t> meta_block(const Plan& p, const cuda::MetaLayout& L, std::span<const RowSampling> rows) const {
    std::vector<uint32_t> block(L.words(p.pages.size()), 0u);
    auto put = [&](size_t at, const std::vector<int32_t>& v) {
      if (!v.empty()) std::memcpy(block.data() + at, v.data(), v.size() * 4);
    };
    put(L.tokens, p.tokens);
    put(L.slot, p.slot);
    put(L.keys, p.keys);
    put(L.table, p.table);
    put(L.tree, p.tree);
    put(L.parent, p.parent);
    put(L.logits, p.logits);
    put(L.pages, p.pages);
    for (size_t r = 0; r < rows.size(); ++r) {
      const k::SampleRow sr = sample_row(rows[r]);
      std::memcpy(block.data() + L.sample + r * kSampleWords, &sr, sizeof sr);
    }
    angles_.angles(p.rope_positions.data(), p.rows, reinterpret_cast<float*>(block.data() + L.cos),
                   reinterpret_cast<float*>(block.data() + L.sin));
    return block;
  }

  void upload_descriptors(const cuda::StateRows& rows, int T, const Scratch& s, cuda::CUstream st) {
    const std::vector<unsigned char> block = rows.descriptors(T);
    stage_.upload(s.desc, block.data(), block.size(), st);
  }

  void append_download(std::vector<float>& out, CUdeviceptr src, size_t floats) {
    size_t n = out.size();
    out.resize(n + floats);
    downloader_.download(out.data() + n, src, floats * sizeof(float), stream_.handle());
  }

  // Where one pass's rows read their metadata and (recurrent models) their sequences.
  struct PassInputs {
    const int32_t *slot, *keys, *table, *pages, *tree, *parent;
    const float *cos, *sin;
    int sequences;           // DeltaNet sequences in the descriptor block
    float* snapshots;        // device snapshot buffer of the pass's taps, or null
    int lone_rows;           // leading rows that attention runs one per CTA (Plan::lone_rows)
    int chunked;             // DeltaNet sequences that take the chunked form (StateRows::chunked)
  };

  // x += o(attention(q/k/v of xn)), gated by sigmoid(gate) when the step has an output gate.
  void attention_mixer(const Scratch& s, const AttentionStep& a, const cuda::DeviceAttention& A, const PassInputs& in,
                       int T, cuda::CUstream st) {
    const int H = config_.hidden_size, hd = a.head_dim, Q = a.heads * hd;
    const k::HeadShape shape{a.heads, a.kv_heads, hd};
    const k::PagedKv kv{at<uint16_t>(side_base(a.kv_layer, 0)), at<uint16_t>(side_base(a.kv_layer, 1)), in.slot,
                        in.keys, in.table, in.pages, page_tokens_, in.tree, in.parent};
    const float* q_norm = A.q_norm ? at<float>(A.q_norm) : nullptr;
    const float* k_norm = A.k_norm ? at<float>(A.k_norm) : nullptr;
    k::gemm(at<uint16_t>(s.xn), at<uint16_t>(A.wqkv), A.qkv_bias ? at<float>(A.qkv_bias) : nullptr, at<float>(s.qkv),
            T, a.qkv.rows(), H, false, st, weights_.normed_halves);
    if (a.output_gate)
      k::gated_qkv_rope_store(at<float>(s.qkv), T, shape, a.rotary_dim, q_norm, k_norm, program_.eps, in.cos, in.sin,
                              kv, at<float>(s.q), at<float>(s.gu), st);
    else
      k::qkv_rope_store(at<float>(s.qkv), T, shape, q_norm, k_norm, program_.eps, in.cos, in.sin, kv, at<float>(s.q),
                        st);
    k::attention(at<float>(s.q), T, shape, kv, 1.0f / std::sqrt(float(hd)), a.output_gate ? at<float>(s.gu) : nullptr,
                 split_, at<uint16_t>(s.act), st, in.lone_rows);
    residual_gemm(s, A.wo, T, Q, st);
  }

  // x += out(gated norm(delta rule(conv(qkv of xn)))), each sequence through its own state slot.
  void deltanet_mixer(const Scratch& s, const DeltaNetStep& d, const cuda::DeviceDeltaNet& D, const PassInputs& in,
                      int T, cuda::CUstream st) {
    const DeltaNetShape& sh = d.shape;
    const int H = config_.hidden_size, C = sh.conv_channels(), V = sh.value_channels(), nv = sh.value_heads;
    const int W = C + V + 2 * nv;  // the fused projection: qkv | z | b | a
    const auto* desc = at<k::DeltaNetSeq>(s.desc);
    const k::DeltaNetBatch batch{desc, in.sequences,
                                 reinterpret_cast<const k::DeltaNetSnapshot*>(s.desc + cuda::StateRows::taps_offset(T)),
                                 states_.base() + d.state_offset, in.snapshots ? in.snapshots + d.state_offset : nullptr};
    const float* fused = at<float>(s.qkv);
    k::gemm(at<uint16_t>(s.xn), at<uint16_t>(D.w_in), nullptr, at<float>(s.qkv), T, W, H, false, st,
            weights_.normed_halves);
    k::deltanet_conv_normalized(fused, W, T, at<float>(D.conv), sh, batch, at<float>(s.q), st);
    k::deltanet_recurrence(at<float>(s.q), T, fused + C + V, fused + C + V + nv, W, at<float>(D.a_log),
                           at<float>(D.dt_bias), sh, batch, at<float>(s.gu), st);
    if (in.chunked > 0)
      k::deltanet_recurrence_chunked(at<float>(s.q), T, fused + C + V, fused + C + V + nv, W, at<float>(D.a_log),
                                     at<float>(D.dt_bias), sh, batch, in.chunked, at<float>(s.prep),
                                     at<float>(s.gu), false, 3, st);
    k::deltanet_gated_norm(at<float>(s.gu), fused + C, W, at<float>(D.norm), T, sh, at<uint16_t>(s.act), st);
    residual_gemm(s, D.w_out, T, V, st);
  }

  // Rows of the vocabulary this runner's embedding and head hold.
  int head_rows() const { return program_.head.rows(); }

  // x += act [T, k] · w: one accumulating GEMM, or under tensor parallelism the rank's partial product summed over
  // the ranks in rank order, then added.
  void residual_gemm(const Scratch& s, CUdeviceptr w, int T, int k, cuda::CUstream st) {
    const int H = config_.hidden_size;
    if (!parallel()) {
      k::gemm(at<uint16_t>(s.act), at<uint16_t>(w), nullptr, at<float>(s.x), T, H, k, true, st);
      return;
    }
    k::gemm(at<uint16_t>(s.act), at<uint16_t>(w), nullptr, at<float>(s.partial), T, H, k, false, st);
    round_->all_reduce(at<float>(s.partial), at<float>(s.gathered), size_t(T) * H, st);
    k::add_in_place(at<float>(s.x), at<float>(s.partial), size_t(T) * H, st);
  }

  // The rows' embeddings into x (under tensor parallelism: each rank's vocabulary slice, summed over the ranks).
  void embed(const Scratch& s, const int32_t* tokens, int T, cuda::CUstream st) {
    const int H = config_.hidden_size;
    if (!parallel()) {
      k::embedding(at<uint16_t>(weights_.embed), tokens, T, H, at<float>(s.x), st);
      return;
    }
    k::embedding_slice(at<uint16_t>(weights_.embed), tokens, T, H, where_.rank * head_rows(), head_rows(),
                       at<float>(s.x), st);
    round_->all_reduce(at<float>(s.x), at<float>(s.gathered), size_t(T) * H, st);
  }

  // Logits [R, vocab] of the normed rows in lastn (under tensor parallelism: each rank's slice, gathered).
  void head_logits(const Scratch& s, int R, cuda::CUstream st) {
    const int H = config_.hidden_size;
    if (!parallel()) {
      k::gemm(at<uint16_t>(s.lastn), at<uint16_t>(weights_.head), nullptr, at<float>(s.logits), R, head_rows(), H,
              false, st);
      return;
    }
    k::gemm(at<uint16_t>(s.lastn), at<uint16_t>(weights_.head), nullptr, at<float>(s.part_logits), R, head_rows(), H,
            false, st);
    round_->all_gather(at<float>(s.part_logits), at<float>(s.gathered), size_t(R) * head_rows(), st);
    k::interleave_slices(at<float>(s.gathered), ranks(), R, head_rows(), at<float>(s.logits), st);
  }

  // Queues the pass over T rows and R logit rows reading the metadata at s.meta laid out by L; with `sample` the
  // sampler writes one id (or -1) per logit row. Eager passes (`plan` set; null for a graph's padded round) may also
  // upload image rows and download states.
  void enqueue(const Scratch& s, const cuda::MetaLayout& L, int T, int R, bool sample, const Plan* plan,
               std::vector<float>* states, int sequences, float* snapshots, cuda::CUstream st) {
    const ModelConfig& c = config_;
    const int H = c.hidden_size;
    const int32_t* meta = at<int32_t>(s.meta);
    const int32_t *tokens = meta + L.tokens, *logit_rows = meta + L.logits;
    const PassInputs in{meta + L.slot,
                        meta + L.keys,
                        meta + L.table,
                        meta + L.pages,
                        meta + L.tree,
                        meta + L.parent,
                        at<float>(s.meta) + L.cos,
                        at<float>(s.meta) + L.sin,
                        sequences,
                        snapshots,
                        plan ? plan->lone_rows : 0,
                        plan ? plan->state.chunked : 0};
    const auto* params = reinterpret_cast<const k::SampleRow*>(meta + L.sample);
    const int layers = int(program_.layers.size());
    round_.reset();
    if (parallel()) round_.emplace(*where_.group, where_.rank, cuda::RoundShape{layers, H, T, R, head_rows()});

    embed(s, tokens, T, st);
    if (plan)
      for (const auto& [row, src] : plan->image_rows)
        stage_.upload(s.x + size_t(row) * H * 4, src, size_t(H) * 4, st);
    if (states) append_download(*states, s.x, size_t(T) * H);
    const float eps = program_.eps;
    const k::HalfType halves = weights_.normed_halves;
    for (int li = 0; li < layers; ++li) {
      const cuda::DeviceLayer& Ly = weights_.layers[size_t(li)];
      const LayerProgram& lp = program_.layers[size_t(li)];
      k::rmsnorm_halves(halves, at<float>(s.x), nullptr, at<float>(Ly.norm), T, H, eps, at<uint16_t>(s.xn), st);
      if (lp.deltanet) deltanet_mixer(s, *lp.deltanet, Ly.deltanet, in, T, st);
      else attention_mixer(s, *lp.attention, Ly.attention, in, T, st);
      const int F = lp.mlp.gate.rows();
      k::rmsnorm_halves(halves, at<float>(s.x), nullptr, at<float>(Ly.mlp_norm), T, H, eps, at<uint16_t>(s.xn), st);
      k::gemm_swiglu(at<uint16_t>(s.xn), at<uint16_t>(Ly.wgate_up), at<uint16_t>(s.act), T, F, H, st, halves);
      residual_gemm(s, Ly.wdown, T, F, st);
      if (states && li + 1 < layers) append_download(*states, s.x, size_t(T) * H);
    }
    if (states) {
      k::rmsnorm_f32(at<float>(s.x), nullptr, at<float>(weights_.final_norm), T, H, eps, at<float>(s.states), st);
      append_download(*states, s.states, size_t(T) * H);
    }
    if (R == 0) {
      if (round_) round_->finish();
      return;
    }
    k::rmsnorm_bf16(at<float>(s.x), logit_rows, at<float>(weights_.final_norm), R, H, eps, at<uint16_t>(s.lastn), st);
    head_logits(s, R, st);
    if (sample && samples_on_device())
      k::sample_rows(at<float>(s.logits), R, c.vocab_size, params, at<int32_t>(s.ids), at<k::LogprobRecord>(s.logprobs),
                     st);
    if (round_) round_->finish();
  }

  // Captures every bucket's graph at start, on padded rounds that only touch the reserved page, so no served round
  // pays for a capture.
  void capture_decode_graphs() {
    const cuda::CUstream st = stream_.handle();
    for (int bucket : cuda::kDecodeBuckets) {
      if (!graphs_on_) break;
      Plan p;
      run_decode_round(p, bucket, {}, st);
    }
    stream_.synchronize();
  }

  // Pads a decode round to `bucket` rows, uploads its metadata into the fixed buffers and replays (or first
  // captures) the bucket's graph; returns the scratch holding its ids and logits.
  const Scratch& run_decode_round(Plan& p, int bucket, std::span<const RowSampling> rows, cuda::CUstream st) {
    const int real_rows = p.rows;
    cuda::pad_decode_rows(p, bucket, dummy_page_, page_tokens_);
    const cuda::MetaLayout L = cuda::meta_layout(p.rows, int(p.logits.size()), rotary_half(), kSampleWords);
    const std::vector<uint32_t> block = meta_block(p, L, rows);
    const Scratch& s = decode_scratch();
    stage_.upload(s.meta, block.data(), block.size() * 4, st);
    if (has_state()) {
      p.state.add_padding(real_rows, bucket - real_rows, states_.padding_floats());
      upload_descriptors(p.state, bucket, s, st);
    }
    launch_decode(bucket, s, L, st);
    return s;
  }

  // Replays the bucket's graph; its first round runs eagerly (loading kernels, setting their attributes) and is then
  // captured. A failed capture turns graphs off for this model; under tensor parallelism it is an error instead, as
  // a rank alone without graphs would issue other collectives than its peers.
  void launch_decode(int bucket, const Scratch& s, const cuda::MetaLayout& L, cuda::CUstream st) {
    auto& graph = graphs_[size_t(cuda::decode_bucket_index(bucket))];
    if (graph) {
      if (parallel()) where_.group->ready(where_.rank);
      graph->launch(st);
      return;
    }
    enqueue(s, L, bucket, bucket, true, nullptr, nullptr, bucket, nullptr, st);
    stream_.synchronize();
    try {
      graph = std::make_unique<cuda::CapturedGraph>(
          st, [&] { enqueue(s, L, bucket, bucket, true, nullptr, nullptr, bucket, nullptr, st); });
    } catch (const std::exception& e) {
      if (parallel())
        throw Error("CUDA graph capture failed on tensor-parallel rank " + std::to_string(where_.rank) + " (" +
                    e.what() + "); set FOLDSERVE_CUDA_GRAPHS=0 to run every rank without graphs");
      std::fprintf(stderr, "foldserve: CUDA graph capture failed (%s); decode rounds run without graphs\n", e.what());
      graphs_on_ = false;
    }
  }

  // The records of the rows that asked for logprobs, into out.logprobs (left empty when none did).
  void download_logprobs(const Scratch& s, std::span<const RowSampling> rows, SampledForward& out, cuda::CUstream st) {
    if (std::none_of(rows.begin(), rows.end(), [](const RowSampling& r) { return r.logprobs >= 0; })) return;
    std::vector<k::LogprobRecord> records(rows.size());
    downloader_.download(records.data(), s.logprobs, records.size() * sizeof(k::LogprobRecord), st);
    out.logprobs.resize(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].logprobs < 0 || rows[r].mode == RowSampling::Mode::Logits) continue;
      RowLogprobs& lp = out.logprobs[r];
      lp.asked = true;
      lp.chosen = records[r].chosen;
      for (int j = 0; j < records[r].count; ++j) lp.top.emplace_back(records[r].top_ids[j], records[r].top_logprobs[j]);
    }
  }

  SampledForward run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states,
                     std::span<const RowSampling> rows) {
    ensure_pool(pool);
    const ModelConfig& c = config_;
    Plan p = plan(chunks);
    const int T = p.rows, R = p.logit_rows;
    if (!rows.empty() && int(rows.size()) != R)
      throw Error("forward_sampled got " + std::to_string(rows.size()) + " sampling rows for " + std::to_string(R) +
                  " logit rows");
    bool any_device = false;
    for (const auto& r : rows) any_device = any_device || r.mode != RowSampling::Mode::Logits;
    SampledForward out;
    out.ids.assign(size_t(R), -1);
    if (T == 0) return out;
    const cuda::CUstream st = stream_.handle();
    const int bucket = cuda::decode_bucket(T);
    const bool graph = graphs_on_ && !states && p.decode_only && p.state.chunked == 0 && R == T && bucket > 0 &&
                       p.pages.size() + 1 <= decode_page_capacity() && p.state.taps.empty();
    Scratch eager{};
    const Scratch* sp = &eager;
    if (graph) {
      sp = &run_decode_round(p, bucket, rows, st);
    } else {
      const cuda::MetaLayout L = cuda::meta_layout(T, R, rotary_half(), kSampleWords);
      const std::vector<uint32_t> block = meta_block(p, L, rows);
      eager = scratch(T, R, block.size() * 4);
      stage_.upload(eager.meta, block.data(), block.size() * 4, st);
      float* snapshots = nullptr;
      if (has_state()) {
        upload_descriptors(p.state, T, eager, st);
        snapshots = states_.snapshot_buffer(p.state.taps.size(), st);
      }
      enqueue(eager, L, T, R, any_device, &p, states, int(p.state.seqs.size()), snapshots, st);
      if (!p.state.taps.empty()) {
        states_.deliver_snapshots(p.state, downloader_, st);
        snapshots_into_pages(p.state, snapshots);
      }
    }
    if (R == 0) {
      stream_.synchronize();
      return out;
    }
    if (any_device) downloader_.download(out.ids.data(), sp->ids, size_t(R) * 4, st);
    download_logprobs(*sp, rows, out, st);
    // Rows without an id come back as logits, each run of neighbours in one copy.
    const size_t V = size_t(c.vocab_size);
    out.logits = take_floats(size_t(std::count(out.ids.begin(), out.ids.end(), -1)) * V);
    size_t filled = 0;
    for (int r = 0; r < R;) {
      if (out.ids[size_t(r)] >= 0) {
        ++r;
        continue;
      }
      int e = r;
      while (e < R && out.ids[size_t(e)] < 0) ++e;
      downloader_.download(out.logits.data() + filled * V, sp->logits + size_t(r) * V * 4, size_t(e - r) * V * 4, st);
      filled += size_t(e - r);
      r = e;
    }
    return out;
  }

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  RunnerPlacement where_;
  cuda::Device device_;
  cuda::Stream stream_;
  cuda::PinnedBudget pinned_;
  cuda::PinnedStage stage_;
  cuda::Downloader downloader_;
  cuda::DeviceWeights weights_;
  std::unique_ptr<cuda::DeviceArena> kv_, scratch_, split_arena_;
  k::AttentionSplit split_{};
  CUdeviceptr kv_base_ = 0;
  size_t slots_ = 0, pool_slots_ = 0;
  int32_t dummy_page_ = 0;
  bool graphs_on_ = true;
  bool chunked_prompts_ = false;  // every DeltaNet layer takes the chunked form (prompt_alignment)
  ModelProgram program_;
  mutable RotaryAngleCache angles_{program_.rotary};  // the meta block's cos/sin rows
  cuda::DeviceStateSlots states_;
  std::unique_ptr<cuda::DeviceArena> decode_scratch_;
  Scratch decode_{};
  std::array<std::unique_ptr<cuda::CapturedGraph>, std::size(cuda::kDecodeBuckets)> graphs_;
  int page_tokens_ = 16;
  const KvPool* attached_ = nullptr;
  std::optional<cuda::RoundCollectives> round_;  // under tensor parallelism, the collectives of the round enqueued
};

}  // namespace

bool cuda_device_available() { return cuda::visible_device_count() > 0; }

std::unique_ptr<Model> create_cuda_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  ModelProgram program = model_program(config, checkpoint.get());
  return std::make_unique<CudaModel>(config, std::move(program), std::move(checkpoint), nullptr, RunnerPlacement{});
}

std::unique_ptr<Model> create_synthetic_cuda_model(const ModelConfig& config, const cuda::SyntheticSpread& spread) {
  return std::make_unique<CudaModel>(config, model_program(config, nullptr), nullptr, &spread, RunnerPlacement{});
}

std::unique_ptr<Model> create_cuda_runner(const ModelConfig& config, ModelProgram program,
                                          std::shared_ptr<Checkpoint> checkpoint, const cuda::SyntheticSpread* spread,
                                          const RunnerPlacement& where) {
  return std::make_unique<CudaModel>(config, std::move(program), std::move(checkpoint), spread, where);
}

}  // namespace fs

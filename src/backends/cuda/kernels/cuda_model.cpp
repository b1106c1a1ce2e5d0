// The Llama family forward on a CUDA device: weights uploaded once as bf16, K/V in device pages indexed by the
// engine's page ids, one stream; every kernel's per-row arithmetic is independent of the batch.
#include <cmath>
#include <cstring>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/cuda_model.h"
#include "backends/cuda/kernels/device_weights.h"
#include "backends/cuda/kernels/ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/rope_table.h"

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

// Row bookkeeping of one forward pass, uploaded as one block: ints then cos/sin floats.
struct Plan {
  int rows = 0, logit_rows = 0;
  std::vector<int32_t> tokens, slot, keys, table, logits, pages;
  std::vector<int> rope_positions;
  std::vector<std::pair<int, const float*>> image_rows;
};

class CudaModel final : public Model {
 public:
  CudaModel(const ModelConfig& c, std::shared_ptr<Checkpoint> ck)
      : config_(c),
        ck_(std::move(ck)),
        device_(0),
        pinned_(kPinnedLimit),
        stage_(pinned_, kStageBytes, "CUDA upload stage"),
        downloader_(device_, pinned_) {
    weights_ = cuda::upload_weights(c, *ck_, llama_family_options(c, ck_.get()), stage_, stream_.handle());
    inv_freq_ = rope_inv_freq(c.rope, c.head_dim);
    sections_ = c.rope.mrope_section.empty() ? std::vector<int>{c.head_dim / 2} : c.rope.mrope_section;
    shape_ = {c.num_heads, c.num_kv_heads, c.head_dim};
  }

  ~CudaModel() override {
    try {
      stream_.synchronize();
    } catch (...) {
    }
  }

  const ModelConfig& config() const override { return config_; }
  size_t weight_bytes() const override { return weights_.matrix_bytes; }
  bool kv_on_host() const override { return false; }
  const char* device_name() const override { return "cuda"; }

  void attach_pool(KvPool& pool) override {
    device_.make_current();
    const size_t slots = size_t(pool.pages_total()) * size_t(pool.page_tokens());
    const size_t bytes = size_t(config_.num_layers) * 2 * slots * size_t(pool.row_floats()) * 2;
    if (!kv_ || kv_->capacity() < bytes) {
      stream_.synchronize();
      kv_.reset();
      kv_ = std::make_unique<cuda::DeviceArena>(bytes, "KV cache");
      kv_base_ = kv_->allocate(bytes, "KV pages").ptr;
    }
    attached_ = &pool;
    slots_ = slots;
    page_tokens_ = pool.page_tokens();
  }

  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    return run(chunks, pool, nullptr);
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    std::vector<float> states;
    run(std::span<const SequenceChunk>(&chunk, 1), pool, &states);
    return states;
  }

  void copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) override {
    ensure_pool(pool);
    const size_t n = size_t(positions) * row_bytes();
    for (int l = 0; l < config_.num_layers; ++l)
      for (int side = 0; side < 2; ++side)
        FS_CU(memcpy_dtod_async, side_base(l, side) + size_t(to) * page_tokens_ * row_bytes(),
              side_base(l, side) + size_t(from) * page_tokens_ * row_bytes(), n, stream_.handle());
  }

  void save_kv_page(KvPool& pool, int32_t page, float* dst) override {
    ensure_pool(pool);
    const size_t n = size_t(page_tokens_) * size_t(pool.row_floats());
    std::vector<uint16_t> bits(n);
    for (int l = 0; l < config_.num_layers; ++l)
      for (int side = 0; side < 2; ++side) {
        downloader_.download(bits.data(), side_base(l, side) + size_t(page) * page_tokens_ * row_bytes(), n * 2,
                             stream_.handle());
        for (size_t i = 0; i < n; ++i) *dst++ = bf16_to_f32(bits[i]);
      }
  }

  void load_kv_page(KvPool& pool, int32_t page, const float* src) override {
    ensure_pool(pool);
    const size_t n = size_t(page_tokens_) * size_t(pool.row_floats());
    std::vector<uint16_t> bits(n);
    for (int l = 0; l < config_.num_layers; ++l)
      for (int side = 0; side < 2; ++side) {
        for (size_t i = 0; i < n; ++i) bits[i] = f32_to_bf16(*src++);
        stage_.upload(side_base(l, side) + size_t(page) * page_tokens_ * row_bytes(), bits.data(), n * 2,
                      stream_.handle());
      }
  }

 private:
  size_t row_bytes() const { return size_t(config_.num_kv_heads) * size_t(config_.head_dim) * 2; }
  CUdeviceptr side_base(int layer, int side) const {
    return kv_base_ + (size_t(layer) * 2 + size_t(side)) * slots_ * row_bytes();
  }

  void ensure_pool(KvPool& pool) {
    device_.make_current();
    if (attached_ != &pool || slots_ != size_t(pool.pages_total()) * size_t(pool.page_tokens())) attach_pool(pool);
  }

  Plan plan(std::span<const SequenceChunk> chunks) const {
    Plan p;
    const int P = page_tokens_;
    for (const auto& ch : chunks) {
      const int end = ch.start_pos + int(ch.tokens.size());
      if (size_t(end) > ch.pages.size() * size_t(P)) throw Error("KV page table too short for the chunk");
      if (!ch.mrope_positions.empty() && ch.mrope_positions.size() != ch.tokens.size() * 3)
        throw Error("M-RoPE positions do not cover the chunk");
      for (int32_t page : ch.pages)
        if (page < 0 || size_t(page) * size_t(P) >= slots_) throw Error("KV page id outside the pool");
      const int32_t table = int32_t(p.pages.size());
      p.pages.insert(p.pages.end(), ch.pages.begin(), ch.pages.end());
      size_t image_row = 0;
      for (size_t i = 0; i < ch.tokens.size(); ++i) {
        const int32_t id = ch.tokens[i];
        if (id < 0 || id >= config_.vocab_size)
          throw Error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                      std::to_string(config_.vocab_size) + ")");
        if (ch.all_logits || (ch.last_logits && i + 1 == ch.tokens.size())) p.logits.push_back(p.rows);
        if (id == config_.image_token_id && !ch.image_embeddings.empty()) {
          if ((image_row + 1) * size_t(config_.hidden_size) > ch.image_embeddings.size())
            throw Error("fewer image features than image tokens in the chunk");
          p.image_rows.emplace_back(p.rows, ch.image_embeddings.data() + image_row++ * config_.hidden_size);
        }
        const int pos = ch.start_pos + int(i);
        p.tokens.push_back(id);
        p.slot.push_back(ch.pages[size_t(pos / P)] * P + pos % P);
        p.keys.push_back(pos + 1);
        p.table.push_back(table);
        for (int s = 0; s < 3; ++s)
          p.rope_positions.push_back(ch.mrope_positions.empty() ? pos + ch.rope_delta
                                                                : ch.mrope_positions[i * 3 + size_t(s)]);
        ++p.rows;
      }
    }
    p.logit_rows = int(p.logits.size());
    return p;
  }

  // Device scratch for T rows, R logit rows and E page entries, grown when a pass needs more.
  struct Scratch {
    CUdeviceptr x, xn, act, qkv, q, gu, states, lastn, logits, meta;
  };

  Scratch scratch(int T, int R, size_t meta_bytes) {
    const ModelConfig& c = config_;
    const size_t H = size_t(c.hidden_size), Q = size_t(c.num_heads) * c.head_dim;
    const size_t KV = size_t(c.num_kv_heads) * c.head_dim, F = size_t(c.intermediate_size);
    const size_t t = size_t(T), r = size_t(R);
    const std::vector<size_t> sizes = {t * H * 4,       t * H * 2,          t * std::max(Q, F) * 2,
                                       t * (Q + 2 * KV) * 4, t * Q * 4,     t * 2 * F * 4,
                                       t * H * 4,       r * H * 2,          r * size_t(c.vocab_size) * 4,
                                       meta_bytes};
    size_t need = 0;
    for (size_t s : sizes) need += (s + 255) / 256 * 256 + 256;
    if (!scratch_ || scratch_->capacity() < need) {
      stream_.synchronize();
      scratch_.reset();
      scratch_ = std::make_unique<cuda::DeviceArena>(need + need / 4, "activation scratch");
    }
    scratch_->release_to(0);
    CUdeviceptr p[10];
    for (size_t i = 0; i < sizes.size(); ++i) p[i] = scratch_->allocate(std::max<size_t>(sizes[i], 16), "scratch").ptr;
    return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
  }

  void append_download(std::vector<float>& out, CUdeviceptr src, size_t floats) {
    size_t n = out.size();
    out.resize(n + floats);
    downloader_.download(out.data() + n, src, floats * sizeof(float), stream_.handle());
  }

  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states) {
    ensure_pool(pool);
    const ModelConfig& c = config_;
    Plan p = plan(chunks);
    const int T = p.rows, R = p.logit_rows, H = c.hidden_size, hd = c.head_dim, half = hd / 2;
    const int Q = c.num_heads * hd, KV = c.num_kv_heads * hd, F = c.intermediate_size;
    if (T == 0) return {};
    // One upload: tokens, slot, keys, table, logit rows, pages (int32), then cos and sin (f32).
    std::vector<uint32_t> block;
    for (const auto* v : {&p.tokens, &p.slot, &p.keys, &p.table, &p.logits, &p.pages})
      for (int32_t x : *v) block.push_back(uint32_t(x));
    const size_t angles_at = block.size();
    block.resize(angles_at + 2 * size_t(T) * half);
    auto* cos = reinterpret_cast<float*>(block.data() + angles_at);
    mrope_angles(inv_freq_, sections_, p.rope_positions.data(), T, cos, cos + size_t(T) * half);
    Scratch s = scratch(T, R, block.size() * 4);
    CUstreamHandle st = stream_.handle();
    stage_.upload(s.meta, block.data(), block.size() * 4, st);
    const int32_t* meta = at<int32_t>(s.meta);
    const int32_t *tokens = meta, *slot = meta + T, *keys = meta + 2 * T, *table = meta + 3 * T;
    const int32_t *logit_rows = meta + 4 * T, *pages = logit_rows + R;
    const float* cosd = at<float>(s.meta) + angles_at;
    const float* sind = cosd + size_t(T) * half;

    k::embedding(at<uint16_t>(weights_.embed), tokens, T, H, at<float>(s.x), st);
    for (const auto& [row, src] : p.image_rows)
      stage_.upload(s.x + size_t(row) * H * 4, src, size_t(H) * 4, st);
    if (states) append_download(*states, s.x, size_t(T) * H);
    const float eps = float(c.rms_norm_eps), scale = 1.0f / std::sqrt(float(hd));
    for (int li = 0; li < c.num_layers; ++li) {
      const cuda::DeviceLayer& L = weights_.layers[size_t(li)];
      k::PagedKv kv{at<uint16_t>(side_base(li, 0)), at<uint16_t>(side_base(li, 1)), slot, keys, table, pages,
                    page_tokens_};
      k::rmsnorm_bf16(at<float>(s.x), nullptr, at<float>(L.attn_norm), T, H, eps, at<uint16_t>(s.xn), st);
      k::gemm(at<uint16_t>(s.xn), at<uint16_t>(L.wqkv), L.qkv_bias ? at<float>(L.qkv_bias) : nullptr,
              at<float>(s.qkv), T, Q + 2 * KV, H, false, st);
      k::qkv_rope_store(at<float>(s.qkv), T, shape_, L.q_norm ? at<float>(L.q_norm) : nullptr,
                        L.k_norm ? at<float>(L.k_norm) : nullptr, eps, cosd, sind, kv, at<float>(s.q), st);
      k::attention(at<float>(s.q), T, shape_, kv, scale, at<uint16_t>(s.act), st);
      k::gemm(at<uint16_t>(s.act), at<uint16_t>(L.wo), nullptr, at<float>(s.x), T, H, Q, true, st);
      k::rmsnorm_bf16(at<float>(s.x), nullptr, at<float>(L.mlp_norm), T, H, eps, at<uint16_t>(s.xn), st);
      k::gemm(at<uint16_t>(s.xn), at<uint16_t>(L.wgate_up), nullptr, at<float>(s.gu), T, 2 * F, H, false, st);
      k::swiglu(at<float>(s.gu), T, F, at<uint16_t>(s.act), st);
      k::gemm(at<uint16_t>(s.act), at<uint16_t>(L.wdown), nullptr, at<float>(s.x), T, H, F, true, st);
      if (states && li + 1 < c.num_layers) append_download(*states, s.x, size_t(T) * H);
    }
    if (states) {
      k::rmsnorm_f32(at<float>(s.x), nullptr, at<float>(weights_.final_norm), T, H, eps, at<float>(s.states), st);
      append_download(*states, s.states, size_t(T) * H);
    }
    std::vector<float> logits(size_t(R) * size_t(c.vocab_size));
    if (R == 0) {
      stream_.synchronize();
      return logits;
    }
    k::rmsnorm_bf16(at<float>(s.x), logit_rows, at<float>(weights_.final_norm), R, H, eps, at<uint16_t>(s.lastn), st);
    k::gemm(at<uint16_t>(s.lastn), at<uint16_t>(weights_.head), nullptr, at<float>(s.logits), R, c.vocab_size, H,
            false, st);
    downloader_.download(logits.data(), s.logits, logits.size() * sizeof(float), st);
    return logits;
  }

  using CUstreamHandle = cuda::CUstream;

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  cuda::Device device_;
  cuda::Stream stream_;
  cuda::PinnedBudget pinned_;
  cuda::PinnedStage stage_;
  cuda::Downloader downloader_;
  cuda::DeviceWeights weights_;
  std::unique_ptr<cuda::DeviceArena> kv_, scratch_;
  CUdeviceptr kv_base_ = 0;
  size_t slots_ = 0;
  int page_tokens_ = 16;
  const KvPool* attached_ = nullptr;
  std::vector<float> inv_freq_;
  std::vector<int> sections_;
  k::HeadShape shape_;
};

}  // namespace

bool cuda_device_available() {
  try {
    return cuda::device_count() > 0;
  } catch (const std::exception&) {
    return false;
  }
}

std::unique_ptr<Model> create_cuda_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  return std::make_unique<CudaModel>(config, std::move(checkpoint));
}

}  // namespace fs

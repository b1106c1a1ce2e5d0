// A vision tower program on a CUDA device: its tokens in the pass's order, per-unit weights (resident or staged from
// pinned host memory into one slot), one pinned image stage, scratch reserved for the largest admitted image.
#include "backends/cuda/kernels/vision_tower_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/image_stage.h"
#include "backends/cuda/host/pinned_memory.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/host/unit_stager.h"
#include "backends/cuda/kernels/ops.h"
#include "backends/cuda/kernels/vision_ops.h"
#include "backends/cuda/kernels/vision_tower_weights.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vision_program_pass.h"

namespace fs::cuda {

namespace {

namespace k = kernels;
using vision::PixelPatches;
using vision::VisionEncoderOptions;
using vision::VisionEncoderStats;
using vision::VisionTowerConfig;

constexpr size_t kAlign = DeviceArena::kDefaultAlignment;

size_t padded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

template <typename T>
T* at(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

// Byte offsets of one pass's bookkeeping block: cos, sin, window index, window tiles, frame tiles, position taps.
struct MetaLayout {
  size_t cos = 0, sin = 0, index = 0, window_tiles = 0, frame_tiles = 0, tap_index = 0, tap_weight = 0, bytes = 0;
};

MetaLayout meta_layout(size_t tokens, size_t half, size_t units, size_t window_tiles, size_t frame_tiles,
                       size_t taps) {
  MetaLayout m;
  size_t p = 0;
  auto take = [&p](size_t bytes) {
    size_t here = p;
    p += padded(bytes);
    return here;
  };
  m.cos = take(tokens * half * 4);
  m.sin = take(tokens * half * 4);
  m.index = take(units * 4);
  m.window_tiles = take(window_tiles * sizeof(k::AttentionTile));
  m.frame_tiles = take(frame_tiles * sizeof(k::AttentionTile));
  m.tap_index = take(taps * 4);
  m.tap_weight = take(taps * 4);
  m.bytes = p;
  return m;
}

// Attention tiles of up to kVisionTileRows rows, each inside one segment of `bounds`.
std::vector<k::AttentionTile> tiles_of(const std::vector<int>& bounds) {
  std::vector<k::AttentionTile> tiles;
  for (size_t s = 0; s + 1 < bounds.size(); ++s)
    for (int r = bounds[s]; r < bounds[s + 1]; r += k::kVisionTileRows)
      tiles.push_back({r, std::min(k::kVisionTileRows, bounds[s + 1] - r), bounds[s], bounds[s + 1]});
  return tiles;
}

template <typename T>
void put(std::vector<unsigned char>& meta, size_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(meta.data() + offset, v.data(), v.size() * sizeof(T));
}

class CudaVisionEncoder final : public vision::VisionEncoder {
 public:
  CudaVisionEncoder(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck, const VisionEncoderOptions& o)
      : config_(c),
        ck_(std::move(ck)),
        program_(vision_program(c, *ck_)),
        options_(o),
        layout_(vision_tower_layout(program_)),
        device_(0),
        max_tokens_(checked_max_patches(o.max_patches, c)),
        meta_capacity_(meta_layout(max_tokens_, half(), program_.windows ? max_tokens_ / size_t(c.merge_unit()) : 0,
                                   program_.windows ? max_tokens_ : 0, max_tokens_, learned_grid() ? 4 * max_tokens_ : 0)
                           .bytes),
        pinned_(pinned_limit()),
        stage_(pinned_, max_tokens_, size_t(c.patch_dim()), meta_capacity_, "vision image stage"),
        downloader_(device_, pinned_) {
    const int units = layout_.units();
    if (o.weights_on_host) {
      require_float_tower(*ck_, program_);
      std::vector<size_t> sizes;
      for (int u = 0; u < units; ++u) sizes.push_back(layout_.unit_bytes(u));
      stager_ = std::make_unique<UnitStager>(pinned_, sizes, "vision tower weights");
      for (int u = 0; u < units; ++u) fill_vision_unit(program_, layout_, *ck_, u, stager_->host_unit(size_t(u)));
    } else {
      weights_ = std::make_unique<DeviceArena>(layout_.total_bytes(), "vision tower weights");
      std::vector<unsigned char> bytes;
      for (int u = 0; u < units; ++u) {
        bytes.assign(layout_.unit_bytes(u), 0);
        fill_vision_unit(program_, layout_, *ck_, u, bytes.data());
        unit_base_.push_back(weights_->allocate(bytes.size(), "vision tower unit").ptr);
        stage_.upload_bytes(unit_base_.back(), bytes.data(), bytes.size(), stream_.handle());
      }
      stage_.wait_idle();
    }
    reserve_scratch();
  }

  ~CudaVisionEncoder() override {
    try {
      stream_.synchronize();
    } catch (...) {
    }
  }

  const VisionTowerConfig& config() const override { return config_; }
  size_t weight_bytes() const override { return layout_.total_bytes(); }
  const char* device_name() const override { return "cuda"; }

  std::vector<std::string> budget_lines() const override {
    std::vector<std::string> lines;
    const VisionEncoderStats s = stats();
    if (stager_) {
      lines.push_back("vision tower (cuda, --vision-host): weights " + mib(s.host_weight_bytes) +
                      " in pinned host memory, device slot " + mib(s.device_slot_bytes) + " (largest unit)");
    } else {
      lines.push_back("vision tower (cuda): weights " + mib(s.device_weight_bytes) + " on the device");
    }
    lines.push_back("vision tower scratch for " + std::to_string(max_tokens_) + " patches: " +
                    mib(s.device_scratch_bytes) + " on the device");
    lines.push_back("vision image stage: " + mib(s.pinned_stage_bytes) + " pinned");
    lines.push_back("vision tower device memory: " +
                    mib(s.device_weight_bytes + s.device_slot_bytes + s.device_scratch_bytes));
    return lines;
  }

  VisionEncoderStats stats() const override {
    VisionEncoderStats s;
    s.device_weight_bytes = weights_ ? weights_->capacity() : 0;
    s.device_slot_bytes = stager_ ? stager_->slot_bytes() : 0;
    s.host_weight_bytes = stager_ ? stager_->host_bytes() : 0;
    s.device_scratch_bytes = scratch_ ? scratch_->capacity() : 0;
    s.pinned_stage_bytes = stage_.capacity();
    s.pinned_allocations = pinned_.allocations();
    s.pinned_frees = pinned_.frees();
    s.images = images_;
    s.last_encode_ms = last_ms_;
    return s;
  }

  std::vector<float> encode(const PixelPatches& px) override {
    const auto start = std::chrono::steady_clock::now();
    device_.make_current();
    const VisionTowerConfig& c = config_;
    const int D = c.patch_dim(), unit = c.merge_unit();
    const VisionPass pass = vision_pass(program_, px.grid);
    const int T = pass.tokens, U = T / unit, H = c.hidden_size, O = c.out_hidden_size;
    if (px.patch_dim != D || px.values.size() != size_t(T) * size_t(D))
      throw Error("pixel patches do not match the vision tower (" + std::to_string(px.patch_dim) +
                  " values per patch, " + std::to_string(D) + " expected)");
    if (size_t(T) > max_tokens_)
      throw Error("image of " + std::to_string(T) + " patches is larger than the " + std::to_string(max_tokens_) +
                  " patches the vision tower was reserved for");
    const std::vector<k::AttentionTile> window_tiles = tiles_of(pass.window_bounds);
    const std::vector<k::AttentionTile> frame_tiles = tiles_of(pass.frame_bounds);
    const MetaLayout ml = meta_layout(size_t(T), half(), pass.window_index.size(), window_tiles.size(),
                                      frame_tiles.size(), pass.taps.index.size());
    std::vector<unsigned char> meta(ml.bytes, 0);
    put(meta, ml.cos, pass.cos);
    put(meta, ml.sin, pass.sin);
    put(meta, ml.index, pass.window_index);
    put(meta, ml.window_tiles, window_tiles);
    put(meta, ml.frame_tiles, frame_tiles);
    put(meta, ml.tap_index, pass.taps.index);
    put(meta, ml.tap_weight, pass.taps.weight);

    CUstream st = stream_.handle();
    ImageRows rows{px.values.data(), size_t(T), size_t(D), size_t(unit), pass.window_index};
    stage_.upload_image(rows, s_.pixels, meta.data(), meta.size(), s_.meta, st);

    const CUdeviceptr patch = unit_weights(0);
    const VisionPatchOffsets& po = layout_.patch;
    k::gemm(at<uint16_t>(s_.pixels), at<uint16_t>(patch + po.weight),
            program_.patch_bias.empty() ? nullptr : at<float>(patch + po.bias), at<float>(s_.x), T, H, D, false, st);
    if (learned_grid())
      k::add_position_taps(at<float>(s_.x), at<float>(patch + po.grid), at<int32_t>(s_.meta + ml.tap_index),
                           at<float>(s_.meta + ml.tap_weight), T, H, st);
    const Tiles tiles{at<k::AttentionTile>(s_.meta + ml.window_tiles), int(window_tiles.size()),
                      at<k::AttentionTile>(s_.meta + ml.frame_tiles), int(frame_tiles.size())};
    for (int b = 0; b < layout_.depth; ++b)
      run_block(b, unit_weights(1 + b), T, at<float>(s_.meta + ml.cos), at<float>(s_.meta + ml.sin), tiles);
    run_merger(unit_weights(layout_.depth + 1), T);
    if (program_.windows)
      k::scatter_rows(at<float>(s_.merged), at<int32_t>(s_.meta + ml.index), U, O, at<float>(s_.final), st);

    std::vector<float> out(size_t(U) * size_t(O));
    downloader_.download(out.data(), program_.windows ? s_.final : s_.merged, out.size() * sizeof(float), st);
    ++images_;
    last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

 private:
  struct Tiles {
    const k::AttentionTile* window;
    int window_count;
    const k::AttentionTile* frame;
    int frame_count;
  };
  struct Scratch {
    CUdeviceptr pixels = 0, meta = 0, x = 0, xn = 0, big = 0, act = 0, merged = 0, final = 0;
  };

  static size_t checked_max_patches(int64_t max_patches, const VisionTowerConfig& c) {
    if (max_patches <= 0) throw Error("the CUDA vision tower needs the largest admitted image size (max_patches)");
    const int64_t unit = c.merge_unit();
    return size_t((max_patches + unit - 1) / unit * unit);
  }

  size_t half() const { return size_t(config_.head_dim() / 2); }
  bool learned_grid() const { return program_.positions == VisionPositions::LearnedGridAndRotary; }

  // Stage + host weights (with --vision-host) + an integrated device's download bounce buffer.
  size_t pinned_limit() const {
    size_t limit = max_tokens_ * size_t(config_.patch_dim()) * 2 + meta_capacity_ + Downloader::kDefaultBounceBytes;
    if (options_.weights_on_host) limit += layout_.total_bytes() + kAlign * size_t(layout_.units());
    return limit;
  }

  void reserve_scratch() {
    const VisionTowerConfig& c = config_;
    const size_t T = max_tokens_, H = size_t(c.hidden_size), In = size_t(layout_.mlp_in_rows);
    const size_t Fp = size_t(layout_.ffn_padded), U = T / size_t(c.merge_unit()), O = size_t(c.out_hidden_size);
    const std::vector<size_t> sizes = {T * size_t(c.patch_dim()) * 2, meta_capacity_, T * H * 4, T * H * 2,
                                       T * std::max(3 * H, In) * 4, T * std::max(H, Fp) * 2, U * O * 4,
                                       program_.windows ? U * O * 4 : 0};
    size_t need = 0;
    for (size_t s : sizes) need += padded(std::max<size_t>(s, 16));
    scratch_ = std::make_unique<DeviceArena>(need, "vision tower scratch");
    CUdeviceptr p[8];
    for (size_t i = 0; i < sizes.size(); ++i) p[i] = scratch_->allocate(std::max<size_t>(sizes[i], 16), "scratch").ptr;
    s_ = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
  }

  // The unit's weights on the device: resident, or copied into the slot now (after the previous unit's kernels).
  CUdeviceptr unit_weights(int unit) {
    if (!stager_) return unit_base_.at(size_t(unit));
    stager_->stage(size_t(unit), stream_.handle());
    return stager_->slot();
  }

  // xn = norm(x) as bf16 with the norm at `o` of unit `w`.
  void norm(CUdeviceptr w, const VisionNormOffsets& o, int T, uint16_t* xn) {
    const float* x = at<float>(s_.x);
    const int H = config_.hidden_size;
    if (program_.norm == VisionNorm::Rms)
      k::rmsnorm_bf16(x, nullptr, at<float>(w + o.weight), T, H, program_.eps, xn, stream_.handle());
    else
      k::layer_norm_bf16(x, at<float>(w + o.weight), at<float>(w + o.bias), T, H, program_.eps, xn, stream_.handle());
  }

  void run_block(int index, CUdeviceptr w, int T, const float* cos, const float* sin, const Tiles& tiles) {
    const VisionTowerConfig& c = config_;
    const VisionBlockOffsets& o = layout_.block;
    const int H = c.hidden_size, F = c.intermediate_size, Fp = layout_.ffn_padded, In = layout_.mlp_in_rows;
    const int hd = c.head_dim();
    const float scale = 1.0f / std::sqrt(float(hd));
    CUstream st = stream_.handle();
    float* x = at<float>(s_.x);
    uint16_t* xn = at<uint16_t>(s_.xn);
    float* big = at<float>(s_.big);
    uint16_t* act = at<uint16_t>(s_.act);
    norm(w, o.norm1, T, xn);
    k::gemm(xn, at<uint16_t>(w + o.wqkv), at<float>(w + o.qkv_bias), big, T, 3 * H, H, false, st);
    k::vision_rope_qk(big, T, c.num_heads, hd, cos, sin, st);
    const bool full = program_.blocks.at(size_t(index)).full_attention;
    k::segment_attention(big, c.num_heads, hd, full ? tiles.frame : tiles.window,
                         full ? tiles.frame_count : tiles.window_count, scale, act, st);
    k::gemm(act, at<uint16_t>(w + o.wproj), at<float>(w + o.proj_bias), x, T, H, H, true, st);
    norm(w, o.norm2, T, xn);
    k::gemm(xn, at<uint16_t>(w + o.wmlp_in), at<float>(w + o.mlp_in_bias), big, T, In, H, false, st);
    if (program_.mlp == VisionMlp::SwiGlu)
      k::swiglu_padded(big, T, F, Fp, act, st);
    else
      k::gelu_padded(big, T, F, Fp, program_.mlp == VisionMlp::GeluTanh, act, st);
    k::gemm(act, at<uint16_t>(w + o.wmlp_out), at<float>(w + o.mlp_out_bias), x, T, H, Fp, true, st);
  }

  // merged[U, O] = fc2(gelu_erf(fc1(norm(x) as rows of merge_unit tokens))).
  void run_merger(CUdeviceptr w, int T) {
    const VisionTowerConfig& c = config_;
    const VisionMergerOffsets& o = layout_.merger;
    const int H = c.hidden_size, M = H * c.merge_unit(), U = T / c.merge_unit(), O = c.out_hidden_size;
    CUstream st = stream_.handle();
    uint16_t* xn = at<uint16_t>(s_.xn);
    float* mid = at<float>(s_.big);
    uint16_t* act = at<uint16_t>(s_.act);
    norm(w, o.norm, T, xn);
    k::gemm(xn, at<uint16_t>(w + o.fc1), at<float>(w + o.fc1_bias), mid, U, M, M, false, st);
    k::gelu_erf(mid, int64_t(U) * M, act, st);
    k::gemm(act, at<uint16_t>(w + o.fc2), at<float>(w + o.fc2_bias), at<float>(s_.merged), U, O, M, false, st);
  }

  VisionTowerConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  VisionProgram program_;
  VisionEncoderOptions options_;
  VisionTowerLayout layout_;
  Device device_;
  Stream stream_;
  size_t max_tokens_;
  size_t meta_capacity_;
  PinnedBudget pinned_;
  ImageStage stage_;
  Downloader downloader_;
  std::unique_ptr<DeviceArena> weights_;
  std::vector<CUdeviceptr> unit_base_;
  std::unique_ptr<UnitStager> stager_;
  std::unique_ptr<DeviceArena> scratch_;
  Scratch s_;
  uint64_t images_ = 0;
  double last_ms_ = 0;
};

}  // namespace

std::unique_ptr<vision::VisionEncoder> create_cuda_vision_encoder(const VisionTowerConfig& config,
                                                                  std::shared_ptr<Checkpoint> checkpoint,
                                                                  const VisionEncoderOptions& options) {
  return std::make_unique<CudaVisionEncoder>(config, std::move(checkpoint), options);
}

}  // namespace fs::cuda

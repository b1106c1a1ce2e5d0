#include "backends/cuda/kernels/device_weights.h"

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/driver_table.h"
#include "backends/cuda/host/f16_range.h"
#include "backends/cuda/kernels/fill_ops.h"
#include "backends/cuda/kernels/halves_ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "io/safetensors.h"
#include "models/ref_loader.h"
#include "models/weights_loader.h"

namespace fs::cuda {

namespace {

constexpr size_t kAlign = DeviceArena::kDefaultAlignment;

size_t padded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

size_t matrix_bytes(const std::vector<const MatrixRef*>& refs) {
  size_t n = 0;
  for (const MatrixRef* m : refs) n += size_t(m->rows()) * size_t(m->cols()) * 2;
  return n;
}

size_t vector_bytes(const VectorRef& v) { return size_t(v.size()) * sizeof(float); }

// Two floats the f16 check folds maxima into, kept after it.
constexpr size_t kMaximaBytes = 2 * sizeof(float);

// The bytes each step's buffers take once padded, in upload order, and the f16 check's maxima.
size_t arena_bytes(const ModelProgram& p) {
  size_t n = padded(kMaximaBytes) + padded(matrix_bytes({&p.embed})) +
             (p.tied() ? 0 : padded(matrix_bytes({&p.head}))) + padded(vector_bytes(p.final_norm));
  for (const LayerProgram& L : p.layers) {
    n += padded(vector_bytes(L.norm)) + padded(vector_bytes(L.mlp_norm));
    if (const auto& a = L.attention) {
      n += padded(matrix_bytes({&a->qkv})) + padded(matrix_bytes({&a->o}));
      for (const VectorRef* v : {&a->qkv_bias, &a->q_norm, &a->k_norm}) n += v->empty() ? 0 : padded(vector_bytes(*v));
    }
    if (const auto& d = L.deltanet) {
      n += padded(matrix_bytes({&d->in_qkv, &d->in_z, &d->in_b, &d->in_a})) + padded(matrix_bytes({&d->out}));
      for (const VectorRef* v : {&d->conv, &d->a_log, &d->dt_bias, &d->norm}) n += padded(vector_bytes(*v));
    }
    n += padded(matrix_bytes({&L.mlp.gate, &L.mlp.up})) + padded(matrix_bytes({&L.mlp.down}));
  }
  return n;
}

// Places the program's tensors in the arena: read from a checkpoint through the stage, or made on the device.
class Uploader {
 public:
  Uploader(const Checkpoint& ck, DeviceArena& arena, PinnedStage& stage, CUstream stream)
      : ck_(&ck), arena_(arena), stage_(&stage), stream_(stream) {}
  Uploader(const SyntheticSpread& spread, DeviceArena& arena, CUstream stream)
      : spread_(&spread), arena_(arena), stream_(stream) {}

  // Stacks the matrices' rows (one column count) into one bf16 device matrix.
  CUdeviceptr matrices(const std::vector<const MatrixRef*>& refs) {
    const size_t bytes = matrix_bytes(refs);
    DeviceSpan span = arena_.allocate(bytes, refs.front()->what);
    CUdeviceptr at = span.ptr;
    for (const MatrixRef* ref : refs)
      for (const TensorPart& part : ref->parts) {
        if (part.placed_cols() != refs.front()->cols())
          throw Error("matrix " + ref->what + ": stacked parts differ in columns");
        const size_t n = part.placed_elements();
        if (spread_) synthesize(part.name, at, n, true, 0.0f);
        else upload_matrix(part, at);
        at += n * 2;
        uploaded_ += n * 2;
      }
    return span.ptr;
  }

  // The vector's floats as applied (1 + w where the program says so); 0 for an empty one.
  CUdeviceptr vector(const VectorRef& v) {
    if (v.empty()) return 0;
    if (spread_) {
      DeviceSpan span = arena_.allocate(size_t(v.size()) * sizeof(float), v.what);
      CUdeviceptr at = span.ptr;
      for (const TensorPart& part : v.parts) {
        synthesize(part.name, at, part.placed_elements(), false, v.plus_one ? 1.0f : 0.0f);
        at += part.placed_elements() * sizeof(float);
      }
      return span.ptr;
    }
    const std::vector<float> all = load_ref_floats(*ck_, v);
    DeviceSpan span = arena_.allocate(all.size() * sizeof(float), v.what);
    stage_->upload(span.ptr, all.data(), all.size() * sizeof(float), stream_);
    return span.ptr;
  }

  size_t uploaded() const { return uploaded_; }

 private:
  void upload_matrix(const TensorPart& part, CUdeviceptr at) {
    const WeightMatrix m = load_matrix(*ck_, part.name, int(part.shape[0]), int(part.shape[1]));
    const size_t n = part.placed_elements();
    if (m.dtype == DType::BF16 && !part.slice) {
      stage_->upload(at, m.data, n * 2, stream_);
      return;
    }
    std::vector<uint16_t> bits;
    if (m.dtype == DType::BF16) {
      bits = placed_elements(part, static_cast<const uint16_t*>(m.data));
    } else {
      const std::vector<float> floats = placed_elements(part, static_cast<const float*>(m.data));
      bits.resize(floats.size());
      for (size_t i = 0; i < floats.size(); ++i) bits[i] = f32_to_bf16(floats[i]);
    }
    stage_->upload(at, bits.data(), n * 2, stream_);
  }

  void synthesize(const std::string& name, CUdeviceptr at, size_t n, bool bf16, float extra_offset) {
    const auto [scale, offset] = (*spread_)(name);
    const uint64_t seed = fnv1a64(name);
    if (bf16) kernels::fill_uniform_bf16(reinterpret_cast<uint16_t*>(at), n, seed, scale, offset, stream_);
    else kernels::fill_uniform_f32(reinterpret_cast<float*>(at), n, seed, scale, offset + extra_offset, stream_);
  }

  const Checkpoint* ck_ = nullptr;
  const SyntheticSpread* spread_ = nullptr;
  DeviceArena& arena_;
  PinnedStage* stage_ = nullptr;
  CUstream stream_;
  size_t uploaded_ = 0;
};

}  // namespace

namespace {

DeviceWeights place_weights(const ModelProgram& p, Uploader& up) {
  DeviceWeights w;
  w.embed = up.matrices({&p.embed});
  w.head = p.tied() ? w.embed : up.matrices({&p.head});
  w.final_norm = up.vector(p.final_norm);
  for (const LayerProgram& L : p.layers) {
    DeviceLayer d;
    d.norm = up.vector(L.norm);
    d.mlp_norm = up.vector(L.mlp_norm);
    if (const auto& a = L.attention) {
      d.attention = {up.matrices({&a->qkv}), up.vector(a->qkv_bias), up.vector(a->q_norm), up.vector(a->k_norm),
                     up.matrices({&a->o})};
    }
    if (const auto& n = L.deltanet) {
      d.deltanet.w_in = up.matrices({&n->in_qkv, &n->in_z, &n->in_b, &n->in_a});
      d.deltanet.conv = up.vector(n->conv);
      d.deltanet.a_log = up.vector(n->a_log);
      d.deltanet.dt_bias = up.vector(n->dt_bias);
      d.deltanet.norm = up.vector(n->norm);
      d.deltanet.w_out = up.matrices({&n->out});
    }
    d.wgate_up = up.matrices({&L.mlp.gate, &L.mlp.up});
    d.wdown = up.matrices({&L.mlp.down});
    w.layers.push_back(d);
  }
  w.matrix_bytes = up.uploaded();
  return w;
}

// Each layer's matrices that read RMSNorm outputs: {device matrix, elements}.
std::vector<std::pair<CUdeviceptr, size_t>> normed_input_matrices(const ModelProgram& p, const DeviceWeights& w) {
  std::vector<std::pair<CUdeviceptr, size_t>> out;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProgram& L = p.layers[i];
    const DeviceLayer& d = w.layers[i];
    if (const auto& a = L.attention) out.emplace_back(d.attention.wqkv, matrix_bytes({&a->qkv}) / 2);
    if (const auto& n = L.deltanet)
      out.emplace_back(d.deltanet.w_in, matrix_bytes({&n->in_qkv, &n->in_z, &n->in_b, &n->in_a}) / 2);
    out.emplace_back(d.wgate_up, matrix_bytes({&L.mlp.gate, &L.mlp.up}) / 2);
  }
  return out;
}

// Rewrites the normed-input matrices as f16 when the largest layer norm weight and the largest of their weights say
// f16 holds every value they meet (f16_holds_normed_inputs), which keeps three more bits of each input.
void use_f16_where_it_fits(const ModelProgram& p, DeviceWeights& w, DeviceSpan maxima, CUstream stream) {
  if (p.layers.empty()) return;
  float* norm_max = reinterpret_cast<float*>(maxima.ptr);
  FS_CU(memset_d8_async, maxima.ptr, 0, kMaximaBytes, stream);
  int dim = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProgram& L = p.layers[i];
    dim = std::max({dim, L.norm.size(), L.mlp_norm.size()});
    kernels::fold_max_abs_f32(reinterpret_cast<const float*>(w.layers[i].norm), size_t(L.norm.size()), norm_max,
                              stream);
    kernels::fold_max_abs_f32(reinterpret_cast<const float*>(w.layers[i].mlp_norm), size_t(L.mlp_norm.size()),
                              norm_max, stream);
  }
  const auto matrices = normed_input_matrices(p, w);
  for (const auto& [at, n] : matrices)
    kernels::fold_max_abs_bf16(reinterpret_cast<const uint16_t*>(at), n, norm_max + 1, stream);
  float found[2] = {};
  FS_CU(memcpy_dtoh_async, found, maxima.ptr, kMaximaBytes, stream);
  FS_CU(stream_synchronize, stream);
  if (!f16_holds_normed_inputs(dim, found[0], found[1])) return;
  for (const auto& [at, n] : matrices) kernels::bf16_to_f16(reinterpret_cast<uint16_t*>(at), n, stream);
  w.normed_halves = kernels::HalfType::f16;
}

}  // namespace

DeviceWeights upload_weights(const ModelProgram& p, const Checkpoint& ck, PinnedStage& stage, CUstream stream) {
  auto arena = std::make_unique<DeviceArena>(arena_bytes(p), "model weights");
  const DeviceSpan maxima = arena->allocate(kMaximaBytes, "f16 check");
  Uploader up(ck, *arena, stage, stream);
  DeviceWeights w = place_weights(p, up);
  use_f16_where_it_fits(p, w, maxima, stream);
  w.arena = std::move(arena);
  stage.wait_idle();
  return w;
}

DeviceWeights synthesize_weights(const ModelProgram& p, const SyntheticSpread& spread, CUstream stream) {
  auto arena = std::make_unique<DeviceArena>(arena_bytes(p), "model weights");
  const DeviceSpan maxima = arena->allocate(kMaximaBytes, "f16 check");
  Uploader up(spread, *arena, stream);
  DeviceWeights w = place_weights(p, up);
  use_f16_where_it_fits(p, w, maxima, stream);
  w.arena = std::move(arena);
  return w;
}

}  // namespace fs::cuda

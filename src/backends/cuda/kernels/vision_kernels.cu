// The vision tower's kernels: 2-D rotary on q/k, segment (window or frame) attention, SwiGLU with a zero-padded
// output stride, exact GELU, and the row scatter that undoes the window order.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/vision_attention_mma.cuh"
#include "backends/cuda/kernels/vision_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kKeyChunk = 32;
constexpr int kFallbackRows = 8;  // rows of a tile the f32 kernel serves at once, one per warp
constexpr int kDimsPerLane = kVisionMaxHeadDim / 32;

__global__ void rope_qk_kernel(float* qkv, int heads, int head_dim, const float* cos, const float* sin) {
  const int r = blockIdx.x, half = head_dim / 2, H = heads * head_dim;
  const float* c = cos + size_t(r) * half;
  const float* s = sin + size_t(r) * half;
  for (int i = threadIdx.x; i < 2 * heads * half; i += blockDim.x) {
    const int part = i / (heads * half), h = (i / half) % heads, d = i % half;
    float* v = qkv + size_t(r) * 3 * H + size_t(part) * H + size_t(h) * head_dim;
    const float a = v[d], b = v[d + half];
    v[d] = __fsub_rn(__fmul_rn(a, c[d]), __fmul_rn(b, s[d]));
    v[d + half] = __fadd_rn(__fmul_rn(b, c[d]), __fmul_rn(a, s[d]));
  }
}

// The f32 kernel for head dims that are not multiples of 16. One block per (tile, head); the tile's rows are served
// eight at a time, one warp per row. Each chunk of 32 keys (and their values) is loaded into shared memory once per
// eight rows; lane j scores key j, then the warp folds the chunk into its running max, sum and output (lane owns
// dims lane, lane + 32, ...).
__global__ void __launch_bounds__(32 * kFallbackRows) segment_attention_kernel(const float* qkv, int heads,
                                                                             int head_dim,
                                                                             const AttentionTile* tiles, float scale,
                                                                             uint16_t* out) {
  extern __shared__ float smem[];
  const int hd = head_dim, kstride = hd + 1, H = heads * hd;
  float* ks = smem;
  float* vs = ks + kKeyChunk * kstride;
  float* qs = vs + kKeyChunk * hd;
  const AttentionTile tile = tiles[blockIdx.x];
  const int head = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t stride = 3 * size_t(H);
  for (int r0 = 0; r0 < tile.count; r0 += kFallbackRows) {
    const bool active = r0 + warp < tile.count;
    const int row = tile.row + r0 + warp;
    float* q = qs + warp * hd;
    if (active)
      for (int d = lane; d < hd; d += 32) q[d] = qkv[size_t(row) * stride + size_t(head) * hd + d];
    float acc[kDimsPerLane];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int k0 = tile.key_begin; k0 < tile.key_end; k0 += kKeyChunk) {
      const int n = min(kKeyChunk, tile.key_end - k0);
      __syncthreads();
      for (int i = threadIdx.x; i < n * hd; i += blockDim.x) {
        const int j = i / hd, d = i % hd;
        const float* src = qkv + size_t(k0 + j) * stride + size_t(head) * hd + d;
        ks[j * kstride + d] = src[H];
        vs[j * hd + d] = src[2 * H];
      }
      __syncthreads();
      if (!active) continue;
      float s = -INFINITY;
      if (lane < n) {
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot = fmaf(q[d], ks[lane * kstride + d], dot);
        s = dot * scale;
      }
      const float m_new = fmaxf(m, warp_max(s));
      const float corr = expf(m - m_new);
      const float p = lane < n ? expf(s - m_new) : 0.0f;
      l = l * corr + warp_sum(p);
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= corr;
      for (int j = 0; j < n; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int d = lane + 32 * i;
          if (d < hd) acc[i] = fmaf(pj, vs[j * hd + d], acc[i]);
        }
      }
      m = m_new;
    }
    if (!active) continue;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) out[size_t(row) * H + size_t(head) * hd + d] = f32_to_bf16_bits(acc[i] / l);
    }
  }
}

__global__ void swiglu_padded_kernel(const float* gu, int ffn, int out_stride, uint16_t* out) {
  const int r = blockIdx.y;
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= out_stride) return;
  float v = 0.0f;
  if (f < ffn) {
    const float g = gu[size_t(r) * 2 * ffn + f], u = gu[size_t(r) * 2 * ffn + ffn + f];
    v = (g / (1.0f + expf(-g))) * u;
  }
  out[size_t(r) * out_stride + f] = f32_to_bf16_bits(v);
}

__global__ void gelu_erf_kernel(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    out[i] = f32_to_bf16_bits(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

__global__ void scatter_rows_kernel(const float* src, const int32_t* index, int dim, float* dst) {
  const int r = blockIdx.x;
  const float* from = src + size_t(r) * dim;
  float* to = dst + size_t(index[r]) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) to[d] = from[d];
}

}  // namespace

void vision_rope_qk(float* qkv, int rows, int heads, int head_dim, const float* cos, const float* sin, void* stream) {
  if (rows == 0) return;
  if (head_dim % 2) throw Error("vision rotary needs an even head_dim");
  launch_kernel("vision_rope_qk", rope_qk_kernel, dim3(rows), dim3(kThreads), 0, stream, qkv, heads, head_dim, cos, sin);
}

void segment_attention(const float* qkv, int heads, int head_dim, const AttentionTile* tiles, int tile_count,
                       float scale, uint16_t* out, void* stream) {
  if (tile_count == 0) return;
  if (head_dim <= 0 || head_dim > kVisionMaxHeadDim)
    throw Error("vision attention supports head_dim up to " + std::to_string(kVisionMaxHeadDim) + " (got " +
                std::to_string(head_dim) + ")");
  const cudaStream_t st = as_runtime(stream);
  if (head_dim % 16 == 0) {
    if (reinterpret_cast<uintptr_t>(qkv) % 16 != 0) throw Error("vision attention needs 16-byte aligned qkv");
    switch (head_dim) {
      case 16: vision_mma::launch<16>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 32: vision_mma::launch<32>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 48: vision_mma::launch<48>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 64: vision_mma::launch<64>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 80: vision_mma::launch<80>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 96: vision_mma::launch<96>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 112: vision_mma::launch<112>(qkv, heads, tiles, tile_count, scale, out, st); break;
      default: vision_mma::launch<128>(qkv, heads, tiles, tile_count, scale, out, st); break;
    }
    return;
  }
  if (head_dim % 8 == 0) {  // computed as the next multiple of 16, the extra 8 dims zero
    if (reinterpret_cast<uintptr_t>(qkv) % 16 != 0) throw Error("vision attention needs 16-byte aligned qkv");
    switch (head_dim) {
      case 8: vision_mma::launch<16, 8>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 24: vision_mma::launch<32, 24>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 40: vision_mma::launch<48, 40>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 56: vision_mma::launch<64, 56>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 72: vision_mma::launch<80, 72>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 88: vision_mma::launch<96, 88>(qkv, heads, tiles, tile_count, scale, out, st); break;
      case 104: vision_mma::launch<112, 104>(qkv, heads, tiles, tile_count, scale, out, st); break;
      default: vision_mma::launch<128, 120>(qkv, heads, tiles, tile_count, scale, out, st); break;
    }
    return;
  }
  const size_t smem = (size_t(kKeyChunk) * (head_dim + 1) + size_t(kKeyChunk) * head_dim +
                       size_t(kFallbackRows) * head_dim) * sizeof(float);
  dim3 grid(static_cast<unsigned>(tile_count), static_cast<unsigned>(heads));
  launch_kernel("segment_attention", segment_attention_kernel, grid, dim3(32 * kFallbackRows), unsigned(smem), st, qkv,
                heads, head_dim, tiles, scale, out);
}

void swiglu_padded(const float* gu, int rows, int ffn, int out_stride, uint16_t* out, void* stream) {
  if (rows == 0) return;
  if (out_stride < ffn) throw Error("swiglu output stride is smaller than the FFN width");
  dim3 grid(static_cast<unsigned>((out_stride + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  launch_kernel("swiglu_padded", swiglu_padded_kernel, grid, dim3(kThreads), 0, stream, gu, ffn, out_stride, out);
}

void gelu_erf(const float* x, int64_t n, uint16_t* out, void* stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535);
  launch_kernel("gelu_erf", gelu_erf_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, stream, x, n, out);
}

void scatter_rows(const float* src, const int32_t* index, int rows, int dim, float* dst, void* stream) {
  if (rows == 0) return;
  launch_kernel("scatter_rows", scatter_rows_kernel, dim3(rows), dim3(kThreads), 0, stream, src, index, dim, dst);
}

}  // namespace fs::cuda::kernels

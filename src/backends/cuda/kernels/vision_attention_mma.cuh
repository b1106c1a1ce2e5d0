#pragma once
// Tensor-core segment attention of the vision tower (included by vision_kernels.cu only).
//
// A CTA owns one tile of up to kRows query rows of one segment and one head; warp w owns rows 16w…16w+15. The
// segment's keys stream in blocks of kBlockKeys starting at key_begin, in order: every thread loads f32 k (then v)
// for the next block into registers while the current block is computed, rounds them to bf16 and stores them into
// the other of two shared buffers. Each warp runs its own online softmax over the blocks: S = Q·Kᵀ and O += P·V
// with mma.sync m16n8k16 (q, k, v and P rounded to bf16, f32 accumulation, exp2 with the scale folded in). Keys
// past key_end are zero-filled and masked to -inf. No atomics and no cross-warp reductions: a row's bits depend
// only on its q, its segment's keys and values, and the head shape. A head of D dims that is not a multiple of 16
// (Qwen3.5's 72) computes as HD = D rounded up to 16, its extra dims zero in q, k and v.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"
#include "backends/cuda/kernels/online_softmax.cuh"
#include "backends/cuda/kernels/vision_ops.h"

namespace fs::cuda::kernels::vision_mma {

constexpr int kWarps = kVisionTileRows / 16;  // warp w owns rows 16w…16w+15 of the tile
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockKeys = 64;  // keys per block, blocks start at the segment's first key
static_assert(kVisionTileRows % 16 == 0, "tiles are whole mma row blocks");

template <int HD, int D>
struct Layout {
  static_assert(HD % 16 == 0 && HD <= kVisionMaxHeadDim, "the computed head_dim is a multiple of 16 up to the maximum");
  static_assert(D % 8 == 0 && D <= HD && HD - D < 16, "the stored head_dim is HD or HD − 8");
  static constexpr int kStride = HD + 8;                    // padded shared row (bf16): conflict-free ldmatrix
  static constexpr int kMatrixElems = kBlockKeys * kStride;  // one K or V block
  static constexpr int kChunks = kBlockKeys * D / 4;         // float4 loads per K or V block
  static constexpr int kPerThread = (kChunks + kThreads - 1) / kThreads;
  static constexpr size_t kSmemBytes = size_t(2) * 2 * kMatrixElems * 2;  // two buffers of K and V
};

using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma;
using ptx::pack_bf16;

// Loads this thread's float4 pieces of rows k0…k0+63 of k or v (`base` points at the head's slice of row 0);
// zero past key_end.
template <int HD, int D>
__device__ __forceinline__ void load_part(float4 (&r)[Layout<HD, D>::kPerThread], const float* base, size_t stride,
                                          int k0, int key_end) {
#pragma unroll
  for (int i = 0; i < Layout<HD, D>::kPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads, key = c / (D / 4), part = c % (D / 4);
    r[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < Layout<HD, D>::kChunks && k0 + key < key_end)
      r[i] = __ldg(reinterpret_cast<const float4*>(base + size_t(k0 + key) * stride) + part);
  }
}

// Rounds the loaded pieces to bf16 and stores them as rows of one shared K or V block.
template <int HD, int D>
__device__ __forceinline__ void store_part(uint16_t* dst, const float4 (&r)[Layout<HD, D>::kPerThread]) {
#pragma unroll
  for (int i = 0; i < Layout<HD, D>::kPerThread; ++i) {
    const int c = threadIdx.x + i * kThreads, key = c / (D / 4), part = c % (D / 4);
    if (c < Layout<HD, D>::kChunks)
      *reinterpret_cast<uint2*>(dst + key * Layout<HD, D>::kStride + part * 4) =
          make_uint2(pack_bf16(r[i].x, r[i].y), pack_bf16(r[i].z, r[i].w));
  }
}

// Zeroes the computed dims past the stored ones (D … HD − 1) of every row of both K and V buffers; stores never
// touch them afterwards.
template <int HD, int D>
__device__ __forceinline__ void zero_padding(uint16_t* smem) {
  if constexpr (D < HD) {
    for (int row = threadIdx.x; row < 4 * kBlockKeys; row += kThreads)
#pragma unroll
      for (int d = D; d < HD; ++d) smem[row * Layout<HD, D>::kStride + d] = 0;
  }
}

template <int HD, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const float* qkv, int heads, const AttentionTile* tiles, float scale_log2, uint16_t* out) {
  using L = Layout<HD, D>;
  extern __shared__ __align__(16) uint16_t smem[];  // buffer b: K at 2b, V at 2b + 1
  const AttentionTile tile = tiles[blockIdx.x];
  const int head = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int H = heads * D;
  const size_t stride = 3 * size_t(H);
  const float* kbase = qkv + H + size_t(head) * D;
  const float* vbase = kbase + H;
  const bool active = 16 * warp < tile.count;
  const int blocks = (tile.key_end - tile.key_begin + kBlockKeys - 1) / kBlockKeys;

  // Q fragments straight from global memory (rows past the tile's count are zero).
  uint32_t qf[HD / 16][4];
  {
    const int r0 = 16 * warp + g, r1 = r0 + 8;
    const float* q0 = qkv + size_t(tile.row + r0) * stride + size_t(head) * D + 2 * t;
    const float* q1 = qkv + size_t(tile.row + r1) * stride + size_t(head) * D + 2 * t;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      float2 a = make_float2(0.0f, 0.0f), b = a, c = a, d = a;
      const bool high = kk * 16 + 8 < D;  // the upper 8 dims of this k16 step are stored ones
      if (r0 < tile.count) {
        a = *reinterpret_cast<const float2*>(q0 + kk * 16);
        if (high) c = *reinterpret_cast<const float2*>(q0 + kk * 16 + 8);
      }
      if (r1 < tile.count) {
        b = *reinterpret_cast<const float2*>(q1 + kk * 16);
        if (high) d = *reinterpret_cast<const float2*>(q1 + kk * 16 + 8);
      }
      qf[kk][0] = pack_bf16(a.x, a.y);
      qf[kk][1] = pack_bf16(b.x, b.y);
      qf[kk][2] = pack_bf16(c.x, c.y);
      qf[kk][3] = pack_bf16(d.x, d.y);
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's share of the row sums

  float4 pf[L::kPerThread];
  zero_padding<HD, D>(smem);
  if (blocks > 0) {
    load_part<HD, D>(pf, kbase, stride, tile.key_begin, tile.key_end);
    store_part<HD, D>(smem, pf);
    load_part<HD, D>(pf, vbase, stride, tile.key_begin, tile.key_end);
    store_part<HD, D>(smem + L::kMatrixElems, pf);
  }
  __syncthreads();

  for (int b = 0; b < blocks; ++b) {
    const int k0 = tile.key_begin + b * kBlockKeys, kn = k0 + kBlockKeys;
    const bool more = b + 1 < blocks;
    const uint16_t* ks = smem + (b % 2) * 2 * L::kMatrixElems;
    const uint16_t* vs = ks + L::kMatrixElems;
    uint16_t* next = smem + ((b + 1) % 2) * 2 * L::kMatrixElems;  // last read in block b - 1, before its barrier

    if (more) load_part<HD, D>(pf, kbase, stride, kn, tile.key_end);
    float s[kBlockKeys / 8][4];
    if (active) {
      // S = Q·Kᵀ: 16 rows × 64 keys, eight n8 tiles.
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
        for (int j = 0; j < kBlockKeys / 16; ++j) {
          uint32_t kf[4];
          ldmatrix_x4(kf, ks + (j * 16 + (lane / 16) * 8 + lane % 8) * L::kStride + kk * 16 + (lane / 8) % 2 * 8);
          mma(s[2 * j], qf[kk], kf[0], kf[1]);
          mma(s[2 * j + 1], qf[kk], kf[2], kf[3]);
        }

      // Online softmax for this lane's rows g and g + 8 (keys 2t, 2t + 1 of every n8 tile).
      const bool partial = kn > tile.key_end;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < kBlockKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float v = s[n][2 * h + e] * scale_log2;
            if (partial && k0 + n * 8 + 2 * t + e >= tile.key_end) v = -INFINITY;
            s[n][2 * h + e] = v;
            mx = fmaxf(mx, v);
          }
        const float base = online_softmax_rescale(m[h], l[h], o, h, mx);
#pragma unroll
        for (int n = 0; n < kBlockKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pr = __bfloat162float(__float2bfloat16_rn(exp2f(s[n][2 * h + e] - base)));
            s[n][2 * h + e] = pr;
            l[h] += pr;
          }
      }
    }
    if (more) {
      store_part<HD, D>(next, pf);
      load_part<HD, D>(pf, vbase, stride, kn, tile.key_end);
    }
    if (active) {
      // O += P·V: P's A fragments come straight from the S accumulators, 16 keys at a time.
#pragma unroll
      for (int j = 0; j < kBlockKeys / 16; ++j) {
        const uint32_t pa[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]), pack_bf16(s[2 * j][2], s[2 * j][3]),
                                pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]),
                                pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
        for (int dn = 0; dn < HD / 16; ++dn) {
          uint32_t vf[4];
          ldmatrix_x4_trans(vf, vs + (j * 16 + (lane / 8) % 2 * 8 + lane % 8) * L::kStride + dn * 16 +
                                    (lane / 16) * 8);
          mma(o[2 * dn], pa, vf[0], vf[1]);
          mma(o[2 * dn + 1], pa, vf[2], vf[3]);
        }
      }
    }
    if (more) store_part<HD, D>(next + L::kMatrixElems, pf);
    __syncthreads();
  }

  if (!active) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 16 * warp + g + 8 * h;
    if (r >= tile.count) continue;
    const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
    uint16_t* dst = out + size_t(tile.row + r) * H + size_t(head) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      if (n * 8 < D) *reinterpret_cast<uint32_t*>(dst + n * 8) = pack_bf16(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
  }
}

// Launches the kernel for stored head_dim D computed as HD: one CTA per (tile, head).
template <int HD, int D = HD>
void launch(const float* qkv, int heads, const AttentionTile* tiles, int tile_count, float scale, uint16_t* out,
            cudaStream_t stream) {
  using L = Layout<HD, D>;
  auto kernel = attention_kernel<HD, D>;
  allow_shared_memory_once(kernel, unsigned(L::kSmemBytes), "segment_attention");
  dim3 grid(static_cast<unsigned>(tile_count), static_cast<unsigned>(heads));
  launch_kernel("segment_attention", kernel, grid, dim3(kThreads), unsigned(L::kSmemBytes), stream, qkv, heads, tiles,
                scale * 1.4426950408889634f, out);
}

}  // namespace fs::cuda::kernels::vision_mma

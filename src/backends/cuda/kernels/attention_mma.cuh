#pragma once
// Tensor-core causal GQA attention over the paged KV cache (included by attention.cu only).
//
// A CTA owns TILES tiles of up to 16 (row, head) pairs that share a kv head: consecutive rows × the heads of a group
// (or 16 heads of a larger group). Rows of the CTA that share a page table form one segment; a segment streams its
// keys in blocks of 64 aligned to absolute position 0, in order, through a cp.async pipeline into shared memory that
// all its tiles read. Each tile has four warps; warp w owns keys 16w…16w+15 of every block and keeps its own online
// softmax: S = Q·Kᵀ and O += P·V with
// mma.sync m16n8k16 (Q and P rounded to bf16, f32 accumulation, exp2 with the scale folded in). At the end the four
// warp states of a tile are merged in the order w = 0…3. A row's keys at or past its key count are masked to -inf, so a block
// holding none of its keys changes nothing (correction 1, P = 0, and K/V past the segment's keys are zero-filled):
// a row's bits depend only on its q, its keys and its key count, never on the rows sharing the tile or the call.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"
#include "backends/cuda/kernels/online_softmax.cuh"
#include "backends/cuda/kernels/paged_keys.cuh"
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels::attention_mma {

constexpr int kBlockKeys = 64;  // keys per block, blocks start at absolute positions 0, 64, 128, …
constexpr int kWarps = 4;       // warp w of a tile owns keys 16w…16w+15 of each block
constexpr int kTile = 16;       // (row, head) pairs per tile: the mma M dimension

template <int HD, int TILES>
struct Layout {
  static constexpr int kThreads = 32 * kWarps * TILES;
  static constexpr int kSlots = kTile * TILES;  // (row, head) pairs per CTA
  static constexpr int kStride = HD + 8;  // padded shared row (bf16 elements): conflict-free ldmatrix
  static constexpr int kStages = HD > 128 ? 2 : 3;
  static constexpr int kQElems = kSlots * kStride;
  static constexpr int kStageElems = 2 * kBlockKeys * kStride;  // K block, then V block
  static constexpr int kAccStride = HD + 8;                      // f32 row of one warp's partial output
  static constexpr int kWarpFloats = kTile * kAccStride + 2 * kTile;  // partial output, then m and l
  static constexpr size_t kKvBytes = size_t(kStages) * kStageElems * 2;
  static constexpr size_t kMergeBytes = size_t(kWarps) * TILES * kWarpFloats * 4;
  static constexpr size_t kSmemBytes = kQElems * 2 + (kKvBytes > kMergeBytes ? kKvBytes : kMergeBytes);
};

struct Params {
  const float* q;
  const float* gate;  // null, or f32 [rows, heads·HD]: the output multiplied by sigmoid(gate) before rounding
  uint16_t* out;
  PagedKv kv;
  int rows, heads, kv_heads, group;  // group: query heads per kv head
  int tile_heads, head_tiles;        // heads per tile (≤ 16) and tiles per group
  int tile_rows;                     // rows per CTA (tile_rows · tile_heads ≤ 16 · TILES)
  float scale_log2;                  // softmax scale · log2(e)
};

using ptx::copy16;
using ptx::copy_commit;
using ptx::copy_wait;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma;
using ptx::pack_bf16;

// Queues the copies of key block b (keys b·64…b·64+63 of the segment's page table) into one stage; keys at or past
// `keys` are zero-filled and their pages never read.
template <int HD, int TILES>
__device__ __forceinline__ void load_block(uint16_t* stage, const Params& p, int row, const int32_t* table, int keys,
                                           int kvh, int b) {
  using L = Layout<HD, TILES>;
  constexpr int kChunks = HD / 8;  // 16-byte chunks per key row
  const size_t width = size_t(p.kv_heads) * HD;
  uint16_t* ks = stage;
  uint16_t* vs = stage + kBlockKeys * L::kStride;
#pragma unroll 4
  for (int c = threadIdx.x; c < kBlockKeys * kChunks; c += L::kThreads) {
    const int key = c / kChunks, part = c % kChunks;
    const int j = b * kBlockKeys + key;
    const bool valid = j < keys;
    size_t at = 0;
    if (valid) at = key_slot(p.kv, row, table, j) * width + size_t(kvh) * HD + size_t(part) * 8;
    copy16(ks + key * L::kStride + part * 8, p.kv.keys + at, valid);
    copy16(vs + key * L::kStride + part * 8, p.kv.values + at, valid);
  }
}

template <int HD, int TILES>
__global__ void __launch_bounds__(32 * kWarps * TILES) attention_kernel(Params p) {
  wait_for_previous_grid();
  using L = Layout<HD, TILES>;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* qs = smem;
  uint16_t* kv_smem = smem + L::kQElems;
  float* merge = reinterpret_cast<float*>(kv_smem);
  const int tid = threadIdx.x, tile = tid / (32 * kWarps), warp = (tid / 32) % kWarps, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int kvh = blockIdx.y / p.head_tiles, ht = blockIdx.y % p.head_tiles;
  const int head0 = kvh * p.group + ht * p.tile_heads;
  const int tile_heads = min(p.tile_heads, p.group - ht * p.tile_heads);
  const int row_begin = blockIdx.x * p.tile_rows, row_end = min(p.rows, row_begin + p.tile_rows);

  for (int seg = row_begin; seg < row_end;) {
    const int table_at = p.kv.row_table[seg];
    int seg_end = seg + 1, keys = p.kv.row_keys[seg];
    // A tree row reads its own ancestors' keys, so it is a segment of its own.
    if (!is_tree_row(p.kv, seg))
      while (seg_end < row_end && p.kv.row_table[seg_end] == table_at && !is_tree_row(p.kv, seg_end))
        keys = max(keys, p.kv.row_keys[seg_end++]);
    const int32_t* table = p.kv.pages + table_at;
    // CTA slot i (tile i / 16) ↔ row seg + i / tile_heads, head head0 + i % tile_heads; slots past `active` are
    // padding.
    const int active = (seg_end - seg) * tile_heads;
    const int blocks = (keys + kBlockKeys - 1) / kBlockKeys;

    for (int s = 0; s < L::kStages - 1; ++s) {
      if (s < blocks) load_block<HD, TILES>(kv_smem + s * L::kStageElems, p, seg, table, keys, kvh, s);
      copy_commit();
    }
    // Q tile → bf16 in shared memory (padding slots zero).
    for (int e = tid; e < L::kSlots * HD / 4; e += L::kThreads) {
      const int i = e / (HD / 4), d = (e % (HD / 4)) * 4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i < active)
        v = *reinterpret_cast<const float4*>(
            p.q + (size_t(seg + i / tile_heads) * p.heads + head0 + i % tile_heads) * HD + d);
      uint2 packed = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
      *reinterpret_cast<uint2*>(qs + i * L::kStride + d) = packed;
    }
    int row_keys[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = tile * kTile + g + 8 * h;
      row_keys[h] = i < active ? p.kv.row_keys[seg + i / tile_heads] : 0;
    }
    __syncthreads();
    uint32_t qf[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk)
      ldmatrix_x4(qf[kk], qs + (tile * kTile + (lane / 8) % 2 * 8 + lane % 8) * L::kStride + kk * 16 + (lane / 16) * 8);

    float o[HD / 8][4];
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int b = 0; b < blocks; ++b) {
      copy_wait<L::kStages - 2>();
      __syncthreads();
      const int next = b + L::kStages - 1;
      if (next < blocks)
        load_block<HD, TILES>(kv_smem + (next % L::kStages) * L::kStageElems, p, seg, table, keys, kvh, next);
      copy_commit();
      const uint16_t* ks = kv_smem + (b % L::kStages) * L::kStageElems + warp * 16 * L::kStride;
      const uint16_t* vs = ks + kBlockKeys * L::kStride;

      // S = Q·Kᵀ over this warp's 16 keys: two n8 tiles.
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        uint32_t kf[4];
        ldmatrix_x4(kf, ks + ((lane / 16) * 8 + lane % 8) * L::kStride + kk * 16 + (lane / 8) % 2 * 8);
        mma(s[0], qf[kk], kf[0], kf[1]);
        mma(s[1], qf[kk], kf[2], kf[3]);
      }

      // Online softmax for this lane's two tile slots (g and g + 8), four keys each.
      const int key0 = b * kBlockKeys + warp * 16 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float v = key0 + n * 8 + e < row_keys[h] ? s[n][2 * h + e] * p.scale_log2 : -INFINITY;
            s[n][2 * h + e] = v;
            mx = fmaxf(mx, v);
          }
        const float base = online_softmax_rescale(m[h], l[h], o, h, mx);
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pr = __bfloat162float(__float2bfloat16_rn(exp2f(s[n][2 * h + e] - base)));
            s[n][2 * h + e] = pr;
            l[h] += pr;
          }
      }

      // O += P·V: P (16 × 16 keys) is the A fragment straight from the S accumulators.
      const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                              pack_bf16(s[1][2], s[1][3])};
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vs + ((lane / 8) % 2 * 8 + lane % 8) * L::kStride + dn * 16 + (lane / 16) * 8);
        mma(o[2 * dn], pa, vf[0], vf[1]);
        mma(o[2 * dn + 1], pa, vf[2], vf[3]);
      }
    }
    copy_wait<0>();
    __syncthreads();

    // Each warp's state → shared memory; then every output element merges its tile's warps in order 0…3.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    float* mine = merge + (tile * kWarps + warp) * L::kWarpFloats;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<float2*>(mine + (g + 8 * h) * L::kAccStride + n * 8 + 2 * t) =
            make_float2(o[n][2 * h], o[n][2 * h + 1]);
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mine[kTile * L::kAccStride + g + 8 * h] = m[h];
        mine[kTile * L::kAccStride + kTile + g + 8 * h] = l[h];
      }
    }
    __syncthreads();
    for (int e = tid; e < active * (HD / 2); e += L::kThreads) {
      const int slot = e / (HD / 2), d = (e % (HD / 2)) * 2, i = slot % kTile;
      const float* warps = merge + (slot / kTile) * kWarps * L::kWarpFloats;
      float mt = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, warps[w * L::kWarpFloats + kTile * L::kAccStride + i]);
      float sum = 0.0f, o0 = 0.0f, o1 = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float* st = warps + w * L::kWarpFloats;
        const float mw = st[kTile * L::kAccStride + i];
        const float f = mw == -INFINITY ? 0.0f : exp2f(mw - mt);
        sum += st[kTile * L::kAccStride + kTile + i] * f;
        const float2 a = *reinterpret_cast<const float2*>(st + i * L::kAccStride + d);
        o0 += a.x * f;
        o1 += a.y * f;
      }
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const size_t at = (size_t(seg + slot / tile_heads) * p.heads + head0 + slot % tile_heads) * HD + d;
      float a = o0 * inv, c = o1 * inv;
      if (p.gate) {
        const float2 gate = *reinterpret_cast<const float2*>(p.gate + at);
        a *= sigmoid(gate.x);
        c *= sigmoid(gate.y);
      }
      *reinterpret_cast<uint32_t*>(p.out + at) = pack_bf16(a, c);
    }
    __syncthreads();
    seg = seg_end;
  }
}

// Launches the kernel for head_dim HD with TILES tiles per CTA; the grid depends on rows and the head shape only.
template <int HD, int TILES>
void launch_tiles(Params p, cudaStream_t stream) {
  using L = Layout<HD, TILES>;
  auto kernel = attention_kernel<HD, TILES>;
  allow_shared_memory_once(kernel, unsigned(L::kSmemBytes), "attention");
  p.tile_rows = TILES > 1 ? L::kSlots / p.tile_heads : 1;
  dim3 grid((p.rows + p.tile_rows - 1) / p.tile_rows, p.kv_heads * p.head_tiles);
  launch_overlapping_kernel("attention", kernel, grid, dim3(L::kThreads), unsigned(L::kSmemBytes), stream, p);
}

template <int HD>
void launch(const float* q, int rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
            uint16_t* out, cudaStream_t stream) {
  Params p{};
  p.q = q;
  p.gate = gate;
  p.out = out;
  p.kv = kv;
  p.rows = rows;
  p.heads = shape.heads;
  p.kv_heads = shape.kv_heads;
  p.group = shape.heads / shape.kv_heads;
  p.tile_heads = p.group < kTile ? p.group : kTile;
  p.head_tiles = (p.group + p.tile_heads - 1) / p.tile_heads;
  p.scale_log2 = scale * 1.4426950408889634f;
  // Many rows (prefill): several tiles of consecutive rows share each key block (fewer for wide heads, whose
  // accumulators need more registers per thread); few rows (decode): one row per CTA.
  if (rows > 64) launch_tiles<HD, HD <= 128 ? 4 : 2>(p, stream);
  else launch_tiles<HD, 1>(p, stream);
}

}  // namespace fs::cuda::kernels::attention_mma

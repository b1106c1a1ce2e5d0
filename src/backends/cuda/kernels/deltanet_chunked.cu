// The gated delta rule in chunks of 16 rows anchored at each sequence's first row, on tensor cores (prompt rows).
// A first kernel takes every (chunk, value head) at once: the chunk's cumulative log decays G, β, the decayed
// q·k products and T⁻¹ = (I + diag(β) (e^(G_t − G_j) k_t·k_j)_{j<t})⁻¹, none of which depend on the state. The
// second runs a block per (sequence, value head, 16 state columns), four warps each holding S₀ᵀ for a quarter of
// the keys in mma accumulator layout; per chunk: S₀ᵀk | S₀ᵀq on tensor cores, u = β (v − e^G S₀ᵀk), δ = T⁻¹u, the
// outputs e^G S₀ᵀq + (q·k decayed) δ, and S₀ᵀ ← e^(G_last) S₀ᵀ + (e^(G_last − G) δ)ᵀ K on tensor cores. Products
// are TF32, three a pair (high and low halves) unless ONE_PASS.
#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_dims.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"

namespace fs::cuda::kernels {

namespace {

using namespace deltanet_detail;

constexpr int kChunk = 16;         // rows a chunk
constexpr int kWarpColumns = 16;   // state columns a block owns
// How key_dim DK (16, 32, 64 or 128) is shared: kWarps warps a block, each holding kTiles 8-key tiles of S₀ᵀ; staged
// k and q rows kRowStride floats apart (64-bit loads without bank conflicts).
template <int DK>
struct Keys {
  static constexpr int kWarps = DK >= 128 ? 4 : DK >= 64 ? 2 : 1;
  static constexpr int kTiles = DK / 8 / kWarps;
  static constexpr int kRowStride = DK + 8;
};
constexpr int kPStride = 2 * kChunk + 1;
constexpr int kMat = kChunk * kChunk;
constexpr int kPrepFloats = 2 * kMat + 2 * kChunk;  // T⁻¹, decayed q·k, G, β of one (chunk, value head)

// --- the state-free part, every chunk at once ---

constexpr int kMaxGroup = 8;  // value heads a key head serves, at most

// Chunks of a sequence's rows (the last may be partial); none unless it is marked chunked.
__device__ __forceinline__ int chunks_of(const DeltaNetSeq& s) {
  return s.chunked ? (s.rows + kChunk - 1) / kChunk : 0;
}

// The batch's `i`-th sequence marked chunked (z) and the call's index of its first chunk (chunks numbered sequence
// by sequence), in one pass over the batch.
struct ChunkedSequence {
  int z, first_chunk;
};
__device__ ChunkedSequence chunked_sequence(const DeltaNetBatch& batch, int i) {
  int z = 0, first = 0;
  while (z < batch.count - 1 && (!batch.seqs[z].chunked || i-- > 0)) first += chunks_of(batch.seqs[z++]);
  return {z, first};
}

// Piece e of a chunk's q and k rows, four floats a piece: which (0 q, 1 k, 2 or more past both), row and column.
struct QkPiece {
  int which, row, col;
};
template <int DK>
__device__ __forceinline__ QkPiece qk_piece(int e) {
  return {e / (kChunk * (DK / 4)), e / (DK / 4) % kChunk, e % (DK / 4) * 4};
}

// A block per (chunk, key head): 256 threads, one (t, j) pair each; the k·k and q·k products once, then each value
// head of the group's decays, T⁻¹ (a thread a column) and the two matrices.
template <int DK>
__global__ void __launch_bounds__(kMat) prep_kernel(const float* conv, const float* b, const float* a, int ab_stride,
                                                    const float* a_log, const float* dt_bias, Dims d,
                                                    DeltaNetBatch batch, float* prep) {
  constexpr int kKeyDim = DK, kLoads = (2 * kChunk * kKeyDim / 4 + kMat - 1) / kMat;
  wait_for_previous_grid();
  __shared__ float k[kChunk][kKeyDim + 1], q[kChunk][kKeyDim + 1];
  __shared__ float G[kMaxGroup][kChunk], beta[kMaxGroup][kChunk];
  __shared__ float B[kMaxGroup][kChunk][kChunk + 1], Tinv[kMaxGroup][kChunk][kChunk + 1];
  __shared__ float QK[kChunk][kChunk + 1];  // q·k, undecayed
  const int chunk = blockIdx.x, kh = blockIdx.y, tid = threadIdx.x;
  // This block's chunk: sequence z's chunk `chunk − first`, rows row0 … row0 + n − 1.
  int z = 0, first = 0;
  while (z < batch.count && first + chunks_of(batch.seqs[z]) <= chunk) first += chunks_of(batch.seqs[z++]);
  if (z == batch.count) return;
  const int in_seq = (chunk - first) * kChunk, row0 = batch.seqs[z].first_row + in_seq;
  const int n = min(kChunk, batch.seqs[z].rows - in_seq);
  // The rows, four floats a copy, all loads first.
  float4 x[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const auto [which, r, i] = qk_piece<kKeyDim>(tid + u * kMat);
    x[u] = r < n && which < 2 ? *reinterpret_cast<const float4*>(conv + size_t(row0 + r) * d.C + (which ? d.KC : 0) +
                                                     size_t(kh) * kKeyDim + i)
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  // Warp g < group: head kh·group + g's β and cumulative log decay (lanes < 16, a fixed-order scan).
  const int lane = tid % 32, warp = tid / 32;
  if (warp < d.group) {
    const int h = kh * d.group + warp;
    float logd = 0.0f, bt = 0.0f;
    if (lane < n) {  // rows past a partial chunk's end: no decay, β 0
      const size_t at = size_t(row0 + lane) * ab_stride + h;
      logd = -expf(a_log[h]) * softplus(a[at] + dt_bias[h]);
      bt = sigmoid(b[at]);
    }
#pragma unroll
    for (int off = 1; off < kChunk; off *= 2) {
      const float up = __shfl_up_sync(0xffffffffu, logd, off);
      if (lane >= off) logd += up;
    }
    if (lane < kChunk) G[warp][lane] = logd, beta[warp][lane] = bt;
  }
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    const auto [which, r, i] = qk_piece<kKeyDim>(tid + u * kMat);
    if (which >= 2) break;
    float* dst = which ? &k[r][i] : &q[r][i];
    dst[0] = x[u].x, dst[1] = x[u].y, dst[2] = x[u].z, dst[3] = x[u].w;
  }
  __syncthreads();
  const int t = tid / kChunk, j = tid % kChunk;
  float kk = 0.0f, qk = 0.0f;
#pragma unroll 8
  for (int i = 0; i < kKeyDim; ++i) {
    kk = fmaf(k[t][i], k[j][i], kk);
    qk = fmaf(q[t][i], k[j][i], qk);
  }
  QK[t][j] = qk;
  for (int g = 0; g < d.group; ++g) B[g][t][j] = j < t ? beta[g][t] * expf(G[g][t] - G[g][j]) * kk : 0.0f;
  __syncthreads();
  // Column c of head g's T⁻¹ by forward substitution (x_t = [t = c] − Σ_{j<t} B[t][j] x_j), a thread each.
  if (tid < d.group * kChunk) {
    const int g = tid / kChunk, c = tid % kChunk;
    float xs[kChunk];
#pragma unroll
    for (int r = 0; r < kChunk; ++r) {
      float v = r == c ? 1.0f : 0.0f;
#pragma unroll
      for (int jj = 0; jj < r; ++jj) v = fmaf(-B[g][r][jj], xs[jj], v);
      xs[r] = r < c ? 0.0f : v;
      Tinv[g][r][c] = xs[r];
    }
  }
  __syncthreads();
  // W = (decayed q·k) T⁻¹ gives the outputs and diag(e^(G_last − G)) T⁻¹ the state update, both from u.
  for (int g = 0; g < d.group; ++g) {
    float* out = prep + (size_t(chunk) * d.nv + kh * d.group + g) * kPrepFloats;
    float wsum = 0.0f;
#pragma unroll
    for (int m = 0; m < kChunk; ++m)
      if (m <= t) wsum = fmaf(expf(G[g][t] - G[g][m]) * QK[t][m], Tinv[g][m][j], wsum);
    out[kMat + tid] = wsum;
    out[tid] = expf(G[g][kChunk - 1] - G[g][t]) * Tinv[g][t][j];
    if (tid < kChunk) out[2 * kMat + tid] = G[g][tid], out[2 * kMat + kChunk + tid] = beta[g][tid];
  }
}

// --- the state's part ---

// One chunk's staged rows: k and q (fp32, split when read), the block's columns of v, the chunk's prep.
template <int DK>
struct ChunkRows {
  float k[kChunk][Keys<DK>::kRowStride], q[kChunk][Keys<DK>::kRowStride];
  float v[kChunk][kWarpColumns];
  float tinv_d[kChunk][kChunk], w[kChunk][kChunk], g[kChunk], beta[kChunk];
};

template <int DK>
struct ChunkSmem {
  ChunkRows<DK> rows[2];                                  // this chunk's and the next one's, copied ahead
  float p_part[Keys<DK>::kWarps][kWarpColumns][kPStride];  // each warp's S₀ᵀk | S₀ᵀq over its keys
  float u[kChunk][kWarpColumns + 1];                 // β (v − e^G S₀ᵀk)
  float pq[kChunk][kWarpColumns + 1];                // e^G S₀ᵀq
  float d[kChunk][kWarpColumns + 8];                 // e^(G_last − G_t) δ_t, δ = T⁻¹u
};

static_assert(sizeof(ChunkRows<16>) % 16 == 0 && sizeof(ChunkRows<128>) % 16 == 0, "stages stay 16-byte aligned");

// x as a TF32 high half (its top 19 bits) and the rest, whose low 13 bits the tensor cores ignore; a single pass
// takes x rounded to the nearest TF32 value instead.
template <bool ONE_PASS>
__device__ __forceinline__ void split(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (ONE_PASS) {
    hi = ptx::tf32_bits(x);
    lo = 0;
  } else {
    hi = __float_as_uint(x) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
  }
}

// Two adjacent floats split, as (x, y) high halves and low halves.
template <bool ONE_PASS>
__device__ __forceinline__ void split2(const float* p, uint32_t& hx, uint32_t& hy, uint32_t& lx, uint32_t& ly) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  split<ONE_PASS>(v.x, hx, lx);
  split<ONE_PASS>(v.y, hy, ly);
}

// c += a·b from split operands: the small cross terms first, then the high halves.
template <bool ONE_PASS>
__device__ __forceinline__ void mma3(float (&c)[4], const uint32_t (&a_hi)[4], const uint32_t (&a_lo)[4],
                                     uint32_t b0_hi, uint32_t b1_hi, uint32_t b0_lo, uint32_t b1_lo) {
  if constexpr (!ONE_PASS) {
    ptx::mma_tf32(c, a_lo, b0_hi, b1_hi);
    ptx::mma_tf32(c, a_hi, b0_lo, b1_lo);
  }
  ptx::mma_tf32(c, a_hi, b0_hi, b1_hi);
}

// Queues the copies of the call's chunk `chunk` (rows row0 … row0 + n − 1; zeros past them) into `dst`, spread
// over the block's threads.
template <int DK>
__device__ __forceinline__ void stage_rows(ChunkRows<DK>& dst, const float* conv, const float* prep, const Dims& d,
                                           int row0, int n, int chunk, int kh, int h, int c0) {
  constexpr int kKeyDim = DK, kThreads = 32 * Keys<DK>::kWarps;
  const int lane = threadIdx.x;
  for (int e = lane; e < 2 * kChunk * (kKeyDim / 4); e += kThreads) {
    const auto [which, r, i] = qk_piece<kKeyDim>(e);
    const float* src = conv + size_t(row0 + r) * d.C + (which ? d.KC : 0) + size_t(kh) * kKeyDim + i;
    ptx::copy16(which ? &dst.k[r][i] : &dst.q[r][i], r < n ? src : conv, r < n);
  }
  for (int e = lane; e < kChunk * kWarpColumns / 4; e += kThreads) {
    const int r = e / (kWarpColumns / 4), i = e % (kWarpColumns / 4) * 4;
    const size_t at = size_t(r < n ? row0 + r : row0) * d.C + 2 * size_t(d.KC) + size_t(h) * d.dv + c0 + i;
    ptx::copy16(&dst.v[r][i], conv + at, r < n);
  }
  const float* src = prep + (size_t(chunk) * d.nv + h) * kPrepFloats;
  for (int e = lane; e < kPrepFloats / 4; e += kThreads) ptx::copy16(&dst.tinv_d[0][0] + 4 * e, src + 4 * e, true);
}

template <int DK, bool ONE_PASS>
__global__ void __launch_bounds__(32 * Keys<DK>::kWarps) chunked_kernel(const float* conv, const float* prep, Dims d,
                                                                 DeltaNetBatch batch, float* out) {
  constexpr int kKeyDim = DK, kKeyWarps = Keys<DK>::kWarps, kWarpTiles = Keys<DK>::kTiles;
  wait_for_previous_grid();
  FS_DYNAMIC_SHARED(unsigned char, smem_bytes);
  ChunkSmem<DK>& sm = *reinterpret_cast<ChunkSmem<DK>*>(smem_bytes);
  const auto [z, chunk0] = chunked_sequence(batch, int(blockIdx.z));
  const DeltaNetSeq s = batch.seqs[z];
  if (!s.chunked) return;
  const int h = blockIdx.y, c0 = blockIdx.x * kWarpColumns, lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int gq = lane / 4, tq = lane % 4, kh = h / d.group;
  float* state = batch.states + s.state + d.conv_state + int64_t(h) * kKeyDim * d.dv;
  // S[jj]: S₀ᵀ's tile j = w·kWarpTiles + jj (keys 8j…8j+7) in accumulator layout: (column gq, key 8j + 2tq),
  // (gq, 8j + 2tq + 1), (gq + 8, 8j + 2tq), (gq + 8, 8j + 2tq + 1).
  float S[kWarpTiles][4];
  auto key_of = [&](int jj, int e) { return 8 * (w * kWarpTiles + jj) + 2 * tq + (e & 1); };
  auto col_of = [&](int e) { return c0 + gq + (e & 2 ? 8 : 0); };
  // This warp's part of S₀ᵀ as a head's key_dim × value_dim matrix at `to`.
  auto store = [&](float* to) {
#pragma unroll
    for (int jj = 0; jj < kWarpTiles; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) to[size_t(key_of(jj, e)) * d.dv + col_of(e)] = S[jj][e];
  };
#pragma unroll
  for (int jj = 0; jj < kWarpTiles; ++jj)
#pragma unroll
    for (int e = 0; e < 4; ++e) S[jj][e] = s.fresh ? 0.0f : state[size_t(key_of(jj, e)) * d.dv + col_of(e)];
  int tap = s.first_tap;
  const int tap_end = s.first_tap + s.tap_count;
  stage_rows(sm.rows[0], conv, prep, d, s.first_row, min(kChunk, s.rows), chunk0, kh, h, c0);
  ptx::copy_commit();
  for (int base = 0, buf = 0; base < s.rows; base += kChunk, buf ^= 1) {
    const int row0 = s.first_row + base, n = min(kChunk, s.rows - base), chunk = chunk0 + base / kChunk;
    if (base + kChunk < s.rows)
      stage_rows(sm.rows[buf ^ 1], conv, prep, d, row0 + kChunk, min(kChunk, s.rows - base - kChunk), chunk + 1, kh,
                 h, c0);
    ptx::copy_commit();
    ptx::copy_wait<1>();
    __syncthreads();  // this chunk's rows are in; the last chunk's d is read
    const ChunkRows<DK>& rows = sm.rows[buf];
    // S₀ᵀk | S₀ᵀq over this warp's keys: S₀ᵀ as A (tile j's accumulators are k-step j's operand), k and q rows as
    // B; key index t ↔ 2t, t + 4 ↔ 2t + 1 in each 8-key step.
    float p[2][4][4] = {};  // [tile parity][token tile: k 0–7, k 8–15, q 0–7, q 8–15][accumulator]
#pragma unroll
    for (int jj = 0; jj < kWarpTiles; ++jj) {
      const int key = 8 * (w * kWarpTiles + jj) + 2 * tq;
      uint32_t a_hi[4], a_lo[4];
      split<ONE_PASS>(S[jj][0], a_hi[0], a_lo[0]);
      split<ONE_PASS>(S[jj][2], a_hi[1], a_lo[1]);
      split<ONE_PASS>(S[jj][1], a_hi[2], a_lo[2]);
      split<ONE_PASS>(S[jj][3], a_hi[3], a_lo[3]);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        uint32_t b0h, b1h, b0l, b1l;
        split2<ONE_PASS>(&(n >= 2 ? rows.q : rows.k)[8 * (n % 2) + gq][key], b0h, b1h, b0l, b1l);
        mma3<ONE_PASS>(p[jj % 2][n], a_hi, a_lo, b0h, b1h, b0l, b1l);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int n = 0; n < 4; ++n)
        sm.p_part[w][gq + (e & 2 ? 8 : 0)][8 * n + 2 * tq + (e & 1)] = p[0][n][e] + p[1][n][e];
    __syncthreads();
    // The warps' sums in order: u and e^G S₀ᵀq, two (token, column) pairs a thread.
    for (int e = threadIdx.x; e < kChunk * kWarpColumns; e += 32 * kKeyWarps) {
      const int t = e / kWarpColumns, col = e % kWarpColumns;
      float pk = sm.p_part[0][col][t], pq = sm.p_part[0][col][kChunk + t];
#pragma unroll
      for (int u = 1; u < kKeyWarps; ++u) pk += sm.p_part[u][col][t], pq += sm.p_part[u][col][kChunk + t];
      const float decay = expf(rows.g[t]);
      sm.u[t][col] = rows.beta[t] * (rows.v[t][col] - decay * pk);
      sm.pq[t][col] = decay * pq;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kChunk * kWarpColumns; e += 32 * kKeyWarps) {
      const int t = e / kWarpColumns, col = e % kWarpColumns;
      float o = sm.pq[t][col], x = 0.0f;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        o = fmaf(rows.w[t][j], sm.u[j][col], o);
        x = fmaf(rows.tinv_d[t][j], sm.u[j][col], x);
      }
      if (t < n) out[size_t(row0 + t) * d.V + size_t(h) * d.dv + c0 + col] = o;
      sm.d[t][col] = x;
    }
    __syncthreads();
    // S₀ᵀ ← e^(G_last) S₀ᵀ + Dᵀ K on this warp's keys: D's columns as A (tokens as k), k rows as B.
    const float last = expf(rows.g[kChunk - 1]);
#pragma unroll
    for (int jj = 0; jj < kWarpTiles; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[jj][e] *= last;
#pragma unroll
    for (int ks = 0; ks < kChunk / 8; ++ks) {
      uint32_t a_hi[4], a_lo[4];
      split<ONE_PASS>(sm.d[8 * ks + tq][gq], a_hi[0], a_lo[0]);
      split<ONE_PASS>(sm.d[8 * ks + tq][gq + 8], a_hi[1], a_lo[1]);
      split<ONE_PASS>(sm.d[8 * ks + tq + 4][gq], a_hi[2], a_lo[2]);
      split<ONE_PASS>(sm.d[8 * ks + tq + 4][gq + 8], a_hi[3], a_lo[3]);
#pragma unroll
      for (int jj = 0; jj < kWarpTiles; ++jj) {
        const int key = 8 * (w * kWarpTiles + jj) + gq;
        uint32_t b0h, b0l, b1h, b1l;
        split<ONE_PASS>(rows.k[8 * ks + tq][key], b0h, b0l);
        split<ONE_PASS>(rows.k[8 * ks + tq + 4][key], b1h, b1l);
        mma3<ONE_PASS>(S[jj], a_hi, a_lo, b0h, b1h, b0l, b1l);
      }
    }
    // Snapshots after this chunk (taps fall on chunk ends).
    for (; tap < tap_end && batch.taps[tap].after_rows == base + n; ++tap)
      store(batch.snapshots + batch.taps[tap].dest + d.conv_state + int64_t(h) * kKeyDim * d.dv);
  }
  store(state);
}

// Chunks of a call of T rows over `sequences` sequences, at most.
int max_chunks(int T, int sequences) { return T / kChunk + sequences; }

}  // namespace

bool deltanet_chunked_takes(const DeltaNetShape& shape) {
  const int dk = shape.key_dim;
  return (dk == 16 || dk == 32 || dk == 64 || dk == 128) && shape.value_dim % kWarpColumns == 0 &&
         shape.key_heads > 0 && shape.value_heads % shape.key_heads == 0 &&
         shape.value_heads / shape.key_heads <= kMaxGroup;
}

void deltanet_recurrence_chunked(const float* conv, int T, const float* b, const float* a, int ab_stride,
                                 const float* a_log, const float* dt_bias, const DeltaNetShape& shape,
                                 const DeltaNetBatch& batch, int chunked, float* prep, float* out, bool one_pass,
                                 int parts, void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (chunked < 0 || chunked > batch.count) throw Error("more sequences marked chunked than the batch holds");
  if (!deltanet_chunked_takes(shape))
    throw Error("the chunked DeltaNet form takes key_dim 16, 32, 64 or 128, value_dim a multiple of 16 and up to " +
                std::to_string(kMaxGroup) + " value heads a key head");
  if (T == 0 || chunked == 0) return;
  auto with_keys = [&](auto keys) {
    constexpr int kDK = decltype(keys)::value;
    if (parts & 1)
      launch_overlapping_kernel("deltanet_chunk_prep", prep_kernel<kDK>,
                                dim3(unsigned(max_chunks(T, chunked)), unsigned(d.nv / d.group)), dim3(kMat), 0,
                                stream, conv, b, a, ab_stride, a_log, dt_bias, d, batch, prep);
    if (!(parts & 2)) return;
    const dim3 grid(unsigned(d.dv / kWarpColumns), unsigned(d.nv), unsigned(chunked));
    const unsigned bytes = sizeof(ChunkSmem<kDK>);
    auto launch = [&](auto kernel) {
      allow_shared_memory_once(kernel, bytes, "deltanet_recurrence_chunked");
      launch_overlapping_kernel("deltanet_recurrence_chunked", kernel, grid, dim3(32 * Keys<kDK>::kWarps), bytes,
                                stream, conv, static_cast<const float*>(prep), d, batch, out);
    };
    if (one_pass) launch(chunked_kernel<kDK, true>);
    else launch(chunked_kernel<kDK, false>);
  };
  switch (d.dk) {
    case 16: return with_keys(std::integral_constant<int, 16>{});
    case 32: return with_keys(std::integral_constant<int, 32>{});
    case 64: return with_keys(std::integral_constant<int, 64>{});
    default: return with_keys(std::integral_constant<int, 128>{});
  }
}

size_t deltanet_chunked_prep_floats(int T, int sequences, const DeltaNetShape& shape) {
  return size_t(max_chunks(T, sequences)) * size_t(shape.value_heads) * kPrepFloats;
}

}  // namespace fs::cuda::kernels

// Gated DeltaNet kernels: the causal conv (one thread per (row, channel), then one per (sequence, channel) for the
// tail and its snapshots), the delta rule (a block per (sequence, value head, 32 state columns), four lanes per
// column each holding a quarter of the state rows, tokens in order) and the gated output norm (a warp per (row, head)).
#include <cmath>
#include <string>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

constexpr int kConvThreads = 256;
constexpr int kMaxConvKernel = 8;
constexpr int kLanesPerColumn = 4;
constexpr int kColumnsPerBlock = 32;
constexpr int kRecurrenceThreads = kLanesPerColumn * kColumnsPerBlock;
constexpr int kTile = 16;  // tokens whose q, k, β and decay a block prepares at once
constexpr int kMaxKeyDim = 128;

// The sizes the kernels use, from DeltaNetShape on the host.
struct Dims {
  int C = 0, KC = 0, V = 0, nv = 0, dk = 0, dv = 0, group = 0, K = 0;
  int64_t conv_state = 0;
  float q_scale = 0, eps = 0;
};

constexpr int kMaxGridRows = 65535;  // grid y and z limit: rows of the conv, sequences of a call

void check_batch(int T, const DeltaNetBatch& batch) {
  if (T > kMaxGridRows || batch.count > kMaxGridRows)
    throw Error("the CUDA DeltaNet kernels take up to " + std::to_string(kMaxGridRows) +
                " rows and sequences a call (got " + std::to_string(T) + " rows, " + std::to_string(batch.count) +
                " sequences)");
}

Dims dims_of(const DeltaNetShape& s) {
  if (s.key_heads <= 0 || s.value_heads % s.key_heads != 0 || s.key_dim <= 0 || s.key_dim > kMaxKeyDim ||
      s.value_dim <= 0 || s.conv_kernel < 1 || s.conv_kernel > kMaxConvKernel)
    throw Error("the CUDA DeltaNet kernels need value heads a multiple of key heads, key_dim 1.." +
                std::to_string(kMaxKeyDim) + " and conv kernel 1.." + std::to_string(kMaxConvKernel) + " (got " +
                std::to_string(s.value_heads) + "/" + std::to_string(s.key_heads) + " heads, key_dim " +
                std::to_string(s.key_dim) + ", conv kernel " + std::to_string(s.conv_kernel) + ")");
  Dims d;
  d.C = s.conv_channels();
  d.KC = s.key_channels();
  d.V = s.value_channels();
  d.nv = s.value_heads;
  d.dk = s.key_dim;
  d.dv = s.value_dim;
  d.group = s.value_heads / s.key_heads;
  d.K = s.conv_kernel;
  d.conv_state = int64_t(s.conv_state_floats());
  d.q_scale = float(1.0 / std::sqrt(double(s.key_dim)));
  d.eps = s.eps;
  return d;
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// The sequence holding row r (sequences ascend by first_row), or null.
__device__ const DeltaNetSeq* sequence_of(const DeltaNetBatch& batch, int r) {
  int lo = 0, hi = batch.count;  // first sequence with first_row > r is at hi
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (batch.seqs[mid].first_row <= r) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return nullptr;
  const DeltaNetSeq* s = batch.seqs + (lo - 1);
  return r < s->first_row + s->rows ? s : nullptr;
}

// Conv input p of a sequence (p < 0: its tail, zeros when fresh) at channel c.
__device__ __forceinline__ float conv_input(const float* in, int in_stride, const float* tail, const DeltaNetSeq& s,
                                            int K, int C, int p, int c) {
  if (p >= 0) return in[size_t(s.first_row + p) * in_stride + c];
  return s.fresh ? 0.0f : tail[size_t(K - 1 + p) * C + c];
}

__global__ void __launch_bounds__(kConvThreads) conv_kernel(const float* in, int in_stride, const float* weight,
                                                              Dims d, DeltaNetBatch batch, float* out) {
  let_next_grid_start();
  wait_for_previous_grid();
  const int r = blockIdx.y, c = blockIdx.x * kConvThreads + threadIdx.x;
  const DeltaNetSeq* s = sequence_of(batch, r);
  if (!s || c >= d.C) return;
  const float* tail = batch.states + s->state;
  const int t = r - s->first_row;
  float acc = 0.0f;
  for (int i = 0; i < d.K; ++i)
    acc = fmaf(weight[size_t(c) * d.K + i], conv_input(in, in_stride, tail, *s, d.K, d.C, t + i - (d.K - 1), c), acc);
  out[size_t(r) * d.C + c] = silu(acc);
}

// After conv_kernel: each snapshot's tail, then the new tail (read whole before it is written).
__global__ void __launch_bounds__(kConvThreads) conv_tail_kernel(const float* in, int in_stride, Dims d,
                                                                   DeltaNetBatch batch) {
  let_next_grid_start();
  wait_for_previous_grid();
  const int c = blockIdx.x * kConvThreads + threadIdx.x;
  if (c >= d.C) return;
  const DeltaNetSeq s = batch.seqs[blockIdx.y];
  float* tail = batch.states + s.state;
  for (int n = 0; n < s.tap_count; ++n) {
    const DeltaNetSnapshot tap = batch.taps[s.first_tap + n];
    for (int j = 0; j < d.K - 1; ++j)
      batch.snapshots[tap.dest + int64_t(j) * d.C + c] =
          conv_input(in, in_stride, tail, s, d.K, d.C, tap.after_rows - (d.K - 1) + j, c);
  }
  float keep[kMaxConvKernel - 1];
#pragma unroll
  for (int j = 0; j < kMaxConvKernel - 1; ++j)
    if (j < d.K - 1) keep[j] = conv_input(in, in_stride, tail, s, d.K, d.C, s.rows - (d.K - 1) + j, c);
#pragma unroll
  for (int j = 0; j < kMaxConvKernel - 1; ++j)
    if (j < d.K - 1) tail[int64_t(j) * d.C + c] = keep[j];
}

// x · rsqrt(Σx² + 1e-6) · scale over n values, by one warp, into dst.
__device__ void l2_normalize(const float* x, int n, float scale, float* dst) {
  const int lane = threadIdx.x % 32;
  float ss = 0.0f;
  for (int i = lane; i < n; i += 32) ss = fmaf(x[i], x[i], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
  for (int i = lane; i < n; i += 32) dst[i] = (x[i] * inv) * scale;
}

// Per (row, key head): q and k of the conv output L2-normalised in place, q also scaled (one warp).
__global__ void normalize_kernel(float* conv, Dims d) {
  let_next_grid_start();
  wait_for_previous_grid();
  float* row = conv + size_t(blockIdx.x) * d.C + size_t(blockIdx.y) * d.dk;
  l2_normalize(row, d.dk, d.q_scale, row);
  l2_normalize(row + d.KC, d.dk, 1.0f, row + d.KC);
}

// Sum over the four lanes of a column: every lane gets the same bits.
__device__ __forceinline__ float column_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// R state rows per lane: key_dim ≤ 4R. Lane g of a column holds rows gR … gR + R − 1; shared memory keeps each
// lane's rows of q and k contiguous with 4 floats of padding between lanes (zeros past key_dim), so a column's four
// lanes read four 16-byte pieces in different banks with one vector load.
template <int R>
struct RecurrenceRows {
  static constexpr int kStride = R + 4;                         // floats from one lane's rows to the next lane's
  static constexpr int kRowFloats = kLanesPerColumn * kStride;  // one token's q (or k) in shared memory
  __device__ static int at(int i) { return (i / R) * kStride + i % R; }
};

template <int R>
__global__ void __launch_bounds__(kRecurrenceThreads)
    recurrence_kernel(const float* conv, const float* b, const float* a, int ab_stride, const float* a_log,
                      const float* dt_bias, Dims d, DeltaNetBatch batch, float* out) {
  wait_for_previous_grid();
  using Rows = RecurrenceRows<R>;
  static_assert(R % 4 == 0, "rows come in float4 pieces");
  __shared__ __align__(16) float qs[kTile][Rows::kRowFloats];
  __shared__ __align__(16) float ks[kTile][Rows::kRowFloats];
  __shared__ float betas[kTile], decays[kTile];
  __shared__ float vs[kTile][kColumnsPerBlock];  // the tile's values of this block's columns
  const DeltaNetSeq s = batch.seqs[blockIdx.z];
  const int h = blockIdx.y, kh = h / d.group;
  const int g = threadIdx.x % kLanesPerColumn, column = blockIdx.x * kColumnsPerBlock + threadIdx.x / kLanesPerColumn;
  const bool active = column < d.dv;
  const int64_t head_offset = d.conv_state + int64_t(h) * d.dk * d.dv;
  float* state = batch.states + s.state + head_offset;  // [dk][dv]
  float S[R];
#pragma unroll
  for (int m = 0; m < R; ++m) {
    const int i = g * R + m;
    S[m] = !s.fresh && active && i < d.dk ? state[size_t(i) * d.dv + column] : 0.0f;
  }
  // This lane's rows of token t's q or k as float4 pieces.
  auto rows_of = [&](float (*x)[Rows::kRowFloats], int t) {
    return reinterpret_cast<const float4*>(&x[t][g * Rows::kStride]);
  };
  const float A = expf(a_log[h]), bias = dt_bias[h];
  int tap = s.first_tap;
  const int tap_end = s.first_tap + s.tap_count;
  for (int base = 0; base < s.rows; base += kTile) {
    const int n = min(kTile, s.rows - base);
    __syncthreads();  // the previous tile's reads are done
    // The tile's normalised q and k (deltanet_normalize), values, β and decays, all loads issued together.
    for (int e = threadIdx.x; e < n * kLanesPerColumn * R; e += kRecurrenceThreads) {
      const int t = e / (kLanesPerColumn * R), i = e % (kLanesPerColumn * R);
      const float* row = conv + size_t(s.first_row + base + t) * d.C + size_t(kh) * d.dk;
      qs[t][Rows::at(i)] = i < d.dk ? row[i] : 0.0f;
      ks[t][Rows::at(i)] = i < d.dk ? row[d.KC + i] : 0.0f;
    }
    for (int e = threadIdx.x; e < n * kColumnsPerBlock; e += kRecurrenceThreads) {
      const int t = e / kColumnsPerBlock, col = blockIdx.x * kColumnsPerBlock + e % kColumnsPerBlock;
      const size_t r = size_t(s.first_row + base + t);
      vs[t][e % kColumnsPerBlock] = col < d.dv ? conv[r * d.C + 2 * d.KC + size_t(h) * d.dv + col] : 0.0f;
    }
    for (int t = threadIdx.x; t < n; t += kRecurrenceThreads) {
      const size_t r = size_t(s.first_row + base + t);
      betas[t] = sigmoid(b[r * ab_stride + h]);
      decays[t] = expf(-A * softplus(a[r * ab_stride + h] + bias));
    }
    __syncthreads();
    // Token t's decayed state · k (`mem`) comes from the pass that finished token t − 1 when both are in this tile
    // and no snapshot falls between them; each product and sum is the same either way. Rows past key_dim hold zero
    // state and zero q and k, so they add exact zeros.
    float mem = 0.0f;
    bool mem_ready = false;
    for (int t = 0; t < n; ++t) {
      const size_t r = size_t(s.first_row + base + t);
      const float v = vs[t][threadIdx.x / kLanesPerColumn];
      const float4* k4 = rows_of(ks, t);
      if (!mem_ready) {
        const float decay = decays[t];
        mem = 0.0f;
#pragma unroll
        for (int m4 = 0; m4 < R / 4; ++m4) {
          const float4 k = k4[m4];
          const float kk[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            S[4 * m4 + e] *= decay;
            mem = fmaf(S[4 * m4 + e], kk[e], mem);
          }
        }
      }
      const float delta = (v - column_sum(mem)) * betas[t];
      const bool tap_here = tap < tap_end && batch.taps[tap].after_rows == base + t + 1;
      const bool fuse = t + 1 < n && !tap_here;
      const float next_decay = fuse ? decays[t + 1] : 0.0f;
      const float4* q4 = rows_of(qs, t);
      const float4* next4 = rows_of(ks, fuse ? t + 1 : t);
      float o = 0.0f, next_mem = 0.0f;
#pragma unroll
      for (int m4 = 0; m4 < R / 4; ++m4) {
        const float4 k = k4[m4], q = q4[m4], kn = next4[m4];
        const float kk[4] = {k.x, k.y, k.z, k.w}, qq[4] = {q.x, q.y, q.z, q.w}, nn[4] = {kn.x, kn.y, kn.z, kn.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float& st = S[4 * m4 + e];
          st = fmaf(kk[e], delta, st);
          o = fmaf(st, qq[e], o);
          if (fuse) {
            st *= next_decay;
            next_mem = fmaf(st, nn[e], next_mem);
          }
        }
      }
      mem = next_mem;
      mem_ready = fuse;
      o = column_sum(o);
      if (active && g == 0) out[r * d.V + size_t(h) * d.dv + column] = o;
      for (; tap < tap_end && batch.taps[tap].after_rows == base + t + 1; ++tap) {
        float* copy = batch.snapshots + batch.taps[tap].dest + head_offset;
#pragma unroll
        for (int m = 0; m < R; ++m) {
          const int i = g * R + m;
          if (active && i < d.dk) copy[size_t(i) * d.dv + column] = S[m];
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < R; ++m) {
    const int i = g * R + m;
    if (active && i < d.dk) state[size_t(i) * d.dv + column] = S[m];
  }
}

__global__ void gated_norm_kernel(const float* core, const float* z, int z_stride, const float* norm, Dims d,
                                  uint16_t* out) {
  let_next_grid_start();
  wait_for_previous_grid();
  const int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
  const float* o = core + size_t(r) * d.V + size_t(h) * d.dv;
  const float* zr = z + size_t(r) * z_stride + size_t(h) * d.dv;
  float ss = 0.0f;
  for (int j = lane; j < d.dv; j += 32) ss = fmaf(o[j], o[j], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(d.dv) + d.eps);
  uint16_t* y = out + size_t(r) * d.V + size_t(h) * d.dv;
  for (int j = lane; j < d.dv; j += 32) y[j] = f32_to_bf16_bits(norm[j] * (o[j] * inv) * silu(zr[j]));
}

}  // namespace

void deltanet_conv(const float* in, int in_stride, int T, const float* weight, const DeltaNetShape& shape,
                   const DeltaNetBatch& batch, float* out, void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  const unsigned blocks = unsigned((d.C + kConvThreads - 1) / kConvThreads);
  launch_overlapping_kernel("deltanet_conv", conv_kernel, dim3(blocks, T), dim3(kConvThreads), 0, stream, in, in_stride, weight,
                d, batch, out);
  launch_overlapping_kernel("deltanet_conv_tail", conv_tail_kernel, dim3(blocks, batch.count), dim3(kConvThreads), 0, stream, in,
                in_stride, d, batch);
}

void deltanet_recurrence(float* conv, int T, const float* b, const float* a, int ab_stride, const float* a_log,
                         const float* dt_bias, const DeltaNetShape& shape, const DeltaNetBatch& batch, float* out,
                         void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  // Every row's q and k normalised at once, so the recurrence's token loop waits on no reduction.
  launch_overlapping_kernel("deltanet_normalize", normalize_kernel, dim3(T, d.KC / d.dk), dim3(32), 0, stream, conv, d);
  const dim3 grid(unsigned((d.dv + kColumnsPerBlock - 1) / kColumnsPerBlock), unsigned(d.nv), unsigned(batch.count));
  const dim3 block(kRecurrenceThreads);
  if (d.dk <= 16)
    launch_overlapping_kernel("deltanet_recurrence", recurrence_kernel<4>, grid, block, 0, stream, conv, b, a, ab_stride, a_log,
                  dt_bias, d, batch, out);
  else if (d.dk <= 32)
    launch_overlapping_kernel("deltanet_recurrence", recurrence_kernel<8>, grid, block, 0, stream, conv, b, a, ab_stride, a_log,
                  dt_bias, d, batch, out);
  else if (d.dk <= 64)
    launch_overlapping_kernel("deltanet_recurrence", recurrence_kernel<16>, grid, block, 0, stream, conv, b, a, ab_stride, a_log,
                  dt_bias, d, batch, out);
  else
    launch_overlapping_kernel("deltanet_recurrence", recurrence_kernel<32>, grid, block, 0, stream, conv, b, a, ab_stride, a_log,
                  dt_bias, d, batch, out);
}

void deltanet_gated_norm(const float* core, const float* z, int z_stride, const float* norm, int T,
                         const DeltaNetShape& shape, uint16_t* out, void* stream) {
  const Dims d = dims_of(shape);
  if (T == 0) return;
  launch_overlapping_kernel("deltanet_gated_norm", gated_norm_kernel, dim3(T, d.nv), dim3(32), 0, stream, core, z, z_stride, norm,
                d, out);
}

}  // namespace fs::cuda::kernels

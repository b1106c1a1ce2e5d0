// Gated DeltaNet kernels besides the delta rule: the causal conv (a thread per channel walking a run of rows, then
// one per (sequence, channel) for the tail and its snapshots) and the gated output norm (a warp per (row, head)).
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_dims.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

using namespace deltanet_detail;

constexpr int kConvThreads = 256;
constexpr int kConvRows = 16;  // rows a conv thread walks, unless every sequence of the call has one row
constexpr int kNormWarps = 8;  // (row, head) pairs of a gated-norm block
constexpr int kNormHeld = 8;   // values a gated-norm lane keeps in registers

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

// One thread per channel walks `rows` consecutive rows, keeping the last conv_kernel − 1 inputs of its sequence
// in registers (window[kMaxConvKernel − 2 − j] is the input j + 1 rows back), so each input is read once.
__global__ void __launch_bounds__(kConvThreads) conv_kernel(const float* in, int in_stride, const float* weight,
                                                              int T, int rows, Dims d, DeltaNetBatch batch,
                                                              float* out) {
  let_next_grid_start();
  wait_for_previous_grid();
  constexpr int kWindow = kMaxConvKernel - 1;
  const int c = blockIdx.x * kConvThreads + threadIdx.x;
  if (c >= d.C) return;
  const int skip = kWindow - (d.K - 1);  // window slots before the ones this kernel size uses
  const float* wc = weight + size_t(c) * d.K;
  float w[kWindow];  // w[j]: the weight of window slot j
#pragma unroll
  for (int j = 0; j < kWindow; ++j) w[j] = j >= skip ? wc[j - skip] : 0.0f;
  const float w_last = wc[d.K - 1];  // the weight of the row itself
  float window[kWindow];
  const int first = blockIdx.y * rows, end = min(T, first + rows);
  const DeltaNetSeq* one = sequence_of(batch, first);
  if (rows == kConvRows && one && end <= one->first_row + one->rows) {
    // Every row in one sequence: all inputs are read before the first output is written, so the reads overlap.
    float x[kConvRows];
#pragma unroll
    for (int i = 0; i < kConvRows; ++i)
      if (first + i < end) x[i] = in[size_t(first + i) * in_stride + c];
    const float* tail = batch.states + one->state;
#pragma unroll
    for (int j = 0; j < kWindow; ++j)
      window[j] = j >= skip ? conv_input(in, in_stride, tail, *one, d.K, d.C, first - one->first_row - kWindow + j, c)
                            : 0.0f;
#pragma unroll
    for (int i = 0; i < kConvRows; ++i) {
      if (first + i >= end) break;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kWindow; ++j)
        if (j >= skip) acc = fmaf(w[j], window[j], acc);
      acc = fmaf(w_last, x[i], acc);
      out[size_t(first + i) * d.C + c] = silu(acc);
#pragma unroll
      for (int j = 0; j + 1 < kWindow; ++j) window[j] = window[j + 1];
      window[kWindow - 1] = x[i];
    }
    return;
  }
  const DeltaNetSeq* held = nullptr;  // the sequence whose inputs the window holds
  for (int r = first; r < end; ++r) {
    const DeltaNetSeq* s = sequence_of(batch, r);
    if (!s) continue;
    const int t = r - s->first_row;
    if (s != held) {
      const float* tail = batch.states + s->state;
#pragma unroll
      for (int j = 0; j < kWindow; ++j)
        window[j] = j >= skip ? conv_input(in, in_stride, tail, *s, d.K, d.C, t - kWindow + j, c) : 0.0f;
      held = s;
    }
    const float x = in[size_t(r) * in_stride + c];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kWindow; ++j)
      if (j >= skip) acc = fmaf(w[j], window[j], acc);
    acc = fmaf(w_last, x, acc);
    out[size_t(r) * d.C + c] = silu(acc);
#pragma unroll
    for (int j = 0; j + 1 < kWindow; ++j) window[j] = window[j + 1];
    window[kWindow - 1] = x;
  }
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

// A warp per (row, value head), kNormWarps of them a block. Heads of up to 32·kNormHeld values come into registers
// with their z in one round of loads (the norm weights before the wait: no kernel writes them); wider ones are read
// twice. The sums and products are the same either way.
__global__ void __launch_bounds__(kNormWarps * 32)
    gated_norm_kernel(const float* core, const float* z, int z_stride, const float* norm, int T, Dims d,
                      uint16_t* out) {
  let_next_grid_start();
  const bool held = d.dv <= 32 * kNormHeld;
  float w[kNormHeld];
  if (held) load_lane_values(norm, d.dv, w);
  wait_for_previous_grid();
  const int pair = blockIdx.x * kNormWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (pair >= T * d.nv) return;
  const int r = pair / d.nv, h = pair % d.nv;
  const float* o = core + size_t(r) * d.V + size_t(h) * d.dv;
  const float* zr = z + size_t(r) * z_stride + size_t(h) * d.dv;
  uint16_t* y = out + size_t(r) * d.V + size_t(h) * d.dv;
  if (held) {
    float ov[kNormHeld], zv[kNormHeld];
    load_lane_values(o, d.dv, ov);
    load_lane_values(zr, d.dv, zv);
    const float inv = 1.0f / sqrtf(warp_sum(lane_sum_squares(ov, d.dv)) / float(d.dv) + d.eps);
#pragma unroll
    for (int i = 0; i < kNormHeld; ++i)
      if (lane + 32 * i < d.dv) y[lane + 32 * i] = f32_to_bf16_bits(w[i] * (ov[i] * inv) * silu(zv[i]));
    return;
  }
  float ss = 0.0f;
  for (int j = lane; j < d.dv; j += 32) ss = fmaf(o[j], o[j], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(d.dv) + d.eps);
  for (int j = lane; j < d.dv; j += 32) y[j] = f32_to_bf16_bits(norm[j] * (o[j] * inv) * silu(zr[j]));
}

}  // namespace

void deltanet_conv(const float* in, int in_stride, int T, const float* weight, const DeltaNetShape& shape,
                   const DeltaNetBatch& batch, float* out, void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  const unsigned blocks = unsigned((d.C + kConvThreads - 1) / kConvThreads);
  const int rows = T == batch.count ? 1 : kConvRows;
  launch_overlapping_kernel("deltanet_conv", conv_kernel, dim3(blocks, unsigned((T + rows - 1) / rows)),
                            dim3(kConvThreads), 0, stream, in, in_stride, weight, T, rows, d, batch, out);
  launch_overlapping_kernel("deltanet_conv_tail", conv_tail_kernel, dim3(blocks, batch.count), dim3(kConvThreads), 0,
                            stream, in, in_stride, d, batch);
}

void deltanet_gated_norm(const float* core, const float* z, int z_stride, const float* norm, int T,
                         const DeltaNetShape& shape, uint16_t* out, void* stream) {
  const Dims d = dims_of(shape);
  if (T == 0) return;
  const unsigned blocks = unsigned((int64_t(T) * d.nv + kNormWarps - 1) / kNormWarps);
  launch_overlapping_kernel("deltanet_gated_norm", gated_norm_kernel, dim3(blocks), dim3(kNormWarps * 32), 0, stream,
                            core, z, z_stride, norm, T, d, out);
}

}  // namespace fs::cuda::kernels

// The q/k L2 normalisation of the conv output (a warp per (row, key head)), and for calls where every sequence has
// one row (decode rounds) the conv, its tail, its snapshots and the normalisation in one kernel: a warp per
// (sequence, channel group), each lane walking its channels' rows with the same arithmetic as the separate kernels.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_dims.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

using namespace deltanet_detail;

constexpr int kNormalizeWarps = 8;  // (row, key head) pairs of a normalisation block
constexpr int kStepWarps = 4;       // channel groups of a conv-step block
constexpr int kValueGroup = 32 * kKeysPerLane;  // value channels of a conv-step group
constexpr int kWindow = kMaxConvKernel - 1;

// Per (row, key head): q and k of the conv output L2-normalised in place, q also scaled (a warp each, kNormalizeWarps
// of them a block); both heads' loads are issued at once.
__global__ void __launch_bounds__(kNormalizeWarps * 32) normalize_kernel(float* conv, int T, Dims d) {
  let_next_grid_start();
  wait_for_previous_grid();
  const int heads = d.KC / d.dk, pair = blockIdx.x * kNormalizeWarps + threadIdx.x / 32;
  if (pair >= T * heads) return;
  float* row = conv + size_t(pair / heads) * d.C + size_t(pair % heads) * d.dk;
  float q[kKeysPerLane], k[kKeysPerLane];
  load_lane_values(row, d.dk, q);
  load_lane_values(row + d.KC, d.dk, k);
  l2_normalize(q, d.dk, d.q_scale, row);
  l2_normalize(k, d.dk, 1.0f, row + d.KC);
}

// Channel groups of the conv step: each q head, each k head (key_dim channels), then the values in runs of
// kValueGroup.
__host__ __device__ inline int step_groups(const Dims& d) {
  return 2 * (d.KC / d.dk) + (d.C - 2 * d.KC + kValueGroup - 1) / kValueGroup;
}

// A warp per (sequence, channel group); lane holds channels lane + 32i of the group. Its window keeps the last
// K − 1 inputs (window[j], j ≥ skip, oldest first, as conv_kernel keeps them), so every output is conv_kernel's
// fmaf chain and every q and k head is normalize_kernel's sums; the tail and snapshots are conv_tail_kernel's values.
__global__ void __launch_bounds__(kStepWarps * 32)
    conv_step_kernel(const float* in, int in_stride, const float* weight, Dims d, DeltaNetBatch batch, float* out) {
  let_next_grid_start();
  const int lane = threadIdx.x % 32, group = blockIdx.x * kStepWarps + threadIdx.x / 32;
  if (group >= step_groups(d)) return;
  const int key_groups = 2 * (d.KC / d.dk);
  const bool keys = group < key_groups;
  const int c0 = keys ? group * d.dk : 2 * d.KC + (group - key_groups) * kValueGroup;
  const int width = keys ? d.dk : min(kValueGroup, d.C - c0);
  const int skip = kWindow - (d.K - 1);
  // The weights before the wait: no kernel writes them.
  float w[kKeysPerLane][kWindow], w_last[kKeysPerLane];
#pragma unroll
  for (int i = 0; i < kKeysPerLane; ++i) {
    const bool valid = lane + 32 * i < width;
    const float* wc = weight + size_t(c0 + (valid ? lane + 32 * i : 0)) * d.K;
#pragma unroll
    for (int j = 0; j < kWindow; ++j) w[i][j] = valid && j >= skip ? wc[j - skip] : 0.0f;
    w_last[i] = valid ? wc[d.K - 1] : 0.0f;
  }
  wait_for_previous_grid();
  const DeltaNetSeq s = batch.seqs[blockIdx.y];
  float* tail = batch.states + s.state;
  float window[kKeysPerLane][kWindow];
#pragma unroll
  for (int i = 0; i < kKeysPerLane; ++i) {
    const int c = c0 + lane + 32 * i;
#pragma unroll
    for (int j = 0; j < kWindow; ++j)
      window[i][j] = j >= skip && !s.fresh && lane + 32 * i < width ? tail[size_t(j - skip) * d.C + c] : 0.0f;
  }
  // Writes the window (the tail after the rows so far) to `dest`, laid out as the tail.
  auto store_window = [&](float* dest) {
#pragma unroll
    for (int i = 0; i < kKeysPerLane; ++i)
#pragma unroll
      for (int j = 0; j < kWindow; ++j)
        if (j >= skip && lane + 32 * i < width) dest[size_t(j - skip) * d.C + c0 + lane + 32 * i] = window[i][j];
  };
  int tap = s.first_tap;
  const int tap_end = s.first_tap + s.tap_count;
  for (int t = 0; t < s.rows; ++t) {
    const int r = s.first_row + t;
    float x[kKeysPerLane], y[kKeysPerLane];
    load_lane_values(in + size_t(r) * in_stride + c0, width, x);
#pragma unroll
    for (int i = 0; i < kKeysPerLane; ++i) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kWindow; ++j)
        if (j >= skip) acc = fmaf(w[i][j], window[i][j], acc);
      y[i] = silu(fmaf(w_last[i], x[i], acc));
#pragma unroll
      for (int j = 0; j + 1 < kWindow; ++j) window[i][j] = window[i][j + 1];
      window[i][kWindow - 1] = x[i];
    }
    float* row = out + size_t(r) * d.C + c0;
    if (keys) {
      l2_normalize(y, d.dk, group < key_groups / 2 ? d.q_scale : 1.0f, row);
    } else {
#pragma unroll
      for (int i = 0; i < kKeysPerLane; ++i)
        if (lane + 32 * i < width) row[lane + 32 * i] = y[i];
    }
    for (; tap < tap_end && batch.taps[tap].after_rows == t + 1; ++tap)
      store_window(batch.snapshots + batch.taps[tap].dest);
  }
  store_window(tail);
}

}  // namespace

void deltanet_normalize(float* conv, int T, const DeltaNetShape& shape, void* stream) {
  const Dims d = dims_of(shape);
  if (T == 0) return;
  const unsigned pairs = unsigned(int64_t(T) * (d.KC / d.dk));
  launch_overlapping_kernel("deltanet_normalize", normalize_kernel,
                            dim3((pairs + kNormalizeWarps - 1) / kNormalizeWarps), dim3(kNormalizeWarps * 32), 0,
                            stream, conv, T, d);
}

void deltanet_conv_normalized(const float* in, int in_stride, int T, const float* weight, const DeltaNetShape& shape,
                              const DeltaNetBatch& batch, float* out, void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  if (T != batch.count) {
    deltanet_conv(in, in_stride, T, weight, shape, batch, out, stream);
    return deltanet_normalize(out, T, shape, stream);
  }
  const unsigned blocks = unsigned((step_groups(d) + kStepWarps - 1) / kStepWarps);
  launch_overlapping_kernel("deltanet_conv_step", conv_step_kernel, dim3(blocks, unsigned(batch.count)),
                            dim3(kStepWarps * 32), 0, stream, in, in_stride, weight, d, batch, out);
}

}  // namespace fs::cuda::kernels

#pragma once
// Hopper GEMM for few rows (1…64): the wgmma GEMM with the operands' roles swapped. The weight tile (64 output
// columns × 64 k) is wgmma's A and the rows (TOK of them, padded with zeros) its B, so no tensor-core work is spent
// on absent rows. A producer thread streams each tile's 64-wide k steps of w and x through a deep ring of
// shared-memory stages (bulk tensor copies, 128-byte swizzle), and one consumer warpgroup multiplies them. Each k
// slice of 2048 is summed from zero and added onto the running total in slice order, 16 consecutive k per
// tensor-core step: the arithmetic of every element is that of the many-row wgmma kernel (gemm_wgmma.cuh).
//
// With CONS = 2 a CTA's tile is 128 columns: two consumer warpgroups each multiply their 64-column half of every
// weight stage by the same rows, so the rows cross from L2 once per 128 columns. With SUB > 1 each consumer
// warpgroup multiplies SUB 64-column blocks (tiles of up to 256 columns, bigger copies). With BOXES > 1 a stage holds
// BOXES 64-wide k boxes, so each weight row is read 128·BOXES bytes at a time.
//
// With SPLIT > 1 a cluster of SPLIT CTAs (on as many multiprocessors) shares one tile: CTA r takes the r-th run of
// consecutive slices and keeps each slice's sum apart; CTA r − 1 hands it the total of the slices before its run
// through distributed shared memory, it adds its slices onto that total in order and hands the result on. The sums
// and their order are those of one CTA taking every slice.
#include <algorithm>

#include "backends/cuda/kernels/gemm_wgmma.cuh"

namespace fs::cuda::kernels::gemm_detail {

template <int TOK, int STAGES, int SPLIT, int CONS = 1, int BOXES = 1, int SUB = 1>
struct WgmmaRows {
  static constexpr int kSub = SUB;  // 64-column blocks each consumer warpgroup multiplies
  static constexpr int kCols = 64 * CONS * SUB, kBoxK = 64, kStepK = kBoxK * BOXES, kStages = STAGES, kBoxes = BOXES;
  static constexpr int kThreads = 128 * (1 + CONS);  // warpgroup 0: one producer thread; the others consume
  static constexpr uint32_t kHalfBytes = 64 * kBoxK * 2;  // one 64-column block's weight rows of a box
  static constexpr int kStepsPerSlice = kSliceBlocks * 32 / kStepK;
  static constexpr int kMaxRunSlices = 16;  // slices one CTA of a split cluster holds apart
  static constexpr uint32_t kWeightBoxBytes = kCols * kBoxK * 2, kRowBoxBytes = TOK * kBoxK * 2;
  static constexpr uint32_t kWeightBytes = kWeightBoxBytes * BOXES;
  static constexpr uint32_t kStageBytes = kWeightBytes + kRowBoxBytes * BOXES;
  static constexpr int kFrag = TOK / 2;  // accumulator floats per consumer thread and 64-column block
  static constexpr int kConsumers = 128 * CONS;  // consumer threads
  static constexpr size_t kHandOffBytes = SPLIT > 1 ? size_t(SUB * kFrag) * kConsumers * sizeof(float) : 0;
  static constexpr size_t kSmemBytes =
      size_t(kStages) * kStageBytes + kHandOffBytes + (2 * kStages + 1) * sizeof(uint64_t) + 1024;
  static_assert(TOK == 8 || TOK == 16 || TOK == 32 || TOK == 64, "row tiles of 8, 16, 32 or 64");
  static_assert(kStageBytes % 1024 == 0, "swizzled tiles stay 1024-byte aligned");
  static_assert(CONS == 1 || CONS == 2, "one or two consumer warpgroups");
  static_assert(kCols <= 256, "a weight box holds at most 256 rows");
  static_assert(kStepsPerSlice * kStepK == kSliceBlocks * 32, "a slice is whole steps");

  __host__ __device__ static int slices(int k) { return (k + kSliceBlocks * 32 - 1) / (kSliceBlocks * 32); }
  // CTAs that fit one multiprocessor's shared memory at once.
  static int per_multiprocessor() { return std::max(1, int(228 * 1024 / (kSmemBytes + 1024))); }
  // The slices [run_begin(r), run_begin(r + 1)) of cluster CTA r.
  __host__ __device__ static int run_begin(int slices, int r) { return slices * r / SPLIT; }
};

// Copies the rows' k boxes of step `step` into stage `st` (after its weight boxes).
template <class W>
__device__ __forceinline__ void load_row_boxes(uint8_t* st, const CUtensorMap* map_x, uint64_t* bar, int step) {
#pragma unroll
  for (int j = 0; j < W::kBoxes; ++j)
    hopper::tma_load_2d(st + W::kWeightBytes + j * W::kRowBoxBytes, map_x, bar, step * W::kStepK + j * W::kBoxK, 0);
}

// One step of a slice's sum: the step's k boxes in order, four k16 steps each, onto acc (from zero at the slice's
// first step); committed as one wgmma group.
template <bool F16, class W, int N>
__device__ __forceinline__ void wgmma_rows_step(float (&acc)[W::kSub][N], const uint8_t* st, int half,
                                                bool slice_start) {
  hopper::wgmma_fence();
#pragma unroll
  for (int j = 0; j < W::kBoxes; ++j) {
    const uint64_t b = hopper::smem_desc_sw128(st + W::kWeightBytes + j * W::kRowBoxBytes);
#pragma unroll
    for (int i = 0; i < W::kSub; ++i) {
      const uint64_t a =
          hopper::smem_desc_sw128(st + j * W::kWeightBoxBytes + (half * W::kSub + i) * W::kHalfBytes);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        hopper::wgmma_m64k16<F16>(acc[i], a + 2 * kk, b + 2 * kk, !(slice_start && j == 0 && kk == 0));
    }
  }
  hopper::wgmma_commit();
}

template <bool F16, int TOK, int STAGES, int SPLIT, int CONS, int BOXES, int SUB>
__global__ void __cluster_dims__(SPLIT, 1, 1) __launch_bounds__(128 * (1 + CONS), 1)
    wgmma_rows_kernel(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                      GemmOut out, int M, int N, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using W = WgmmaRows<TOK, STAGES, SPLIT, CONS, BOXES, SUB>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  float* hand_off = reinterpret_cast<float*>(smem + W::kStages * W::kStageBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + W::kStages * W::kStageBytes + W::kHandOffBytes);
  uint64_t* empty = full + W::kStages;
  uint64_t* handed = empty + W::kStages;  // the total of the slices before this CTA's run has arrived
  const int tiles = (N + W::kCols - 1) / W::kCols, steps = (K + W::kStepK - 1) / W::kStepK;
  const int rank = SPLIT > 1 ? int(hopper::cluster_rank()) : 0;
  const int slices = W::slices(K);
  const int step_begin = W::run_begin(slices, rank) * W::kStepsPerSlice;
  const int step_end = min(steps, W::run_begin(slices, rank + 1) * W::kStepsPerSlice);
  const int first_tile = blockIdx.x / SPLIT, tile_stride = gridDim.x / SPLIT;

  if (threadIdx.x == 0) {
    hopper::prefetch_tensor_map(&map_w);
    hopper::prefetch_tensor_map(&map_x);
    for (int s = 0; s < W::kStages; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], 4 * CONS);  // lane 0 of each consumer warp
    }
    hopper::mbar_init(handed, W::kConsumers);  // every consumer thread of the previous CTA
    hopper::mbar_init_fence();
  }
  if constexpr (SPLIT > 1) hopper::cluster_sync();  // barriers exist before another CTA arrives on them
  else __syncthreads();

  if (threadIdx.x < 128) {
    if (threadIdx.x != 0) return;
    // The weights do not depend on earlier kernels: the first stages' weight copies start before the wait.
    int stage = 0, issued = 0;
    uint32_t phase = 0;
    bool waited = false;
    for (int tile = first_tile; tile < tiles; tile += tile_stride)
      for (int step = step_begin; step < step_end; ++step) {
        hopper::mbar_wait(&empty[stage], phase ^ 1);
        uint8_t* st = smem + stage * W::kStageBytes;
        hopper::mbar_arrive_expect_tx(&full[stage], W::kStageBytes);
#pragma unroll
        for (int j = 0; j < W::kBoxes; ++j)
          load_weight_box(st + j * W::kWeightBoxBytes, &map_w, &full[stage], step * W::kStepK + j * W::kBoxK,
                          tile * W::kCols, out.act != nullptr);
        if (!waited && (++issued == W::kStages || step == step_end - 1)) {
          wait_for_previous_grid();
          waited = true;
          // Rows for the stages whose weights went ahead of the wait.
          for (int back = issued - 1, s = stage, back_step = step; back >= 0; --back) {
            load_row_boxes<W>(smem + s * W::kStageBytes, &map_x, &full[s], back_step);
            s = s == 0 ? W::kStages - 1 : s - 1;
            --back_step;
          }
        } else if (waited) {
          load_row_boxes<W>(st, &map_x, &full[stage], step);
        }
        if (++stage == W::kStages) stage = 0, phase ^= 1;
      }
    // Every CTA is resident and its copies are issued: the next kernels may take free slots (at 32 and 64 rows;
    // fewer rows lose more to the next GEMM's early weight copies than the launch gains).
    if constexpr (TOK >= 32) let_next_grid_start();
    return;
  }

  wait_for_previous_grid();  // `y` may be read (accumulate) and is written after earlier kernels
  const int consumer = threadIdx.x - 128, half = consumer / 128, warp = (consumer / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  int stage = 0;
  uint32_t phase = 0, handed_phase = 0;
  constexpr int F = W::kFrag;
  float acc[SUB][F], total[SUB][F];
  float run[SPLIT > 1 ? W::kMaxRunSlices : 1][SUB][F];  // CTA r > 0: its slices' sums, added once the total comes
  auto release = [&](int s) {
    if (s >= 0 && lane == 0) hopper::mbar_arrive(&empty[s]);
  };
  // Thread `consumer`'s float f of block i in the hand-off buffer.
  auto hand_off_at = [&](int i, int f) { return &hand_off[(i * F + f) * W::kConsumers + consumer]; };
  for (int tile = first_tile; tile < tiles; tile += tile_stride) {
#pragma unroll
    for (int i = 0; i < SUB; ++i)
#pragma unroll
      for (int f = 0; f < F; ++f) acc[i][f] = total[i][f] = 0.0f;
    int pending = -1, held = 0;
    for (int step = step_begin; step < step_end; ++step) {
      hopper::mbar_wait(&full[stage], phase);
      wgmma_rows_step<F16, W>(acc, smem + stage * W::kStageBytes, half, step % W::kStepsPerSlice == 0);
      if ((step + 1) % W::kStepsPerSlice == 0 || step == steps - 1) {
        hopper::wgmma_wait<0>();
        release(pending);
        release(stage);
        pending = -1;
#pragma unroll
        for (int i = 0; i < SUB; ++i)
#pragma unroll
          for (int f = 0; f < F; ++f) {
            if (rank == 0) total[i][f] += acc[i][f];
            else run[held][i][f] = acc[i][f];
          }
        held += rank > 0;
      } else {
        hopper::wgmma_wait<1>();
        release(pending);
        pending = stage;
      }
      if (++stage == W::kStages) stage = 0, phase ^= 1;
    }
    hopper::wgmma_wait<0>();
    // Element (column c of a 64-column block, row r): D[c][r], so the block's columns are wgmma's rows. The CTA that
    // stores loads the old outputs (when accumulating) before the hand-off wait and before any store.
    auto element = [&](int i, int j, int e, int& row, int& col) {
      col = (tile * (CONS * SUB) + half * SUB + i) * 64 + warp * 16 + g + (e / 2) * 8, row = j * 8 + 2 * t + e % 2;
      return row < M && col < N;
    };
    float old[SUB][TOK / 2] = {};
    if (out.accumulate && !out.act && rank == SPLIT - 1) {
#pragma unroll
      for (int i = 0; i < SUB; ++i)
#pragma unroll
        for (int j = 0; j < TOK / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int row, col;
            old[i][j * 4 + e] = element(i, j, e, row, col) ? out.y[size_t(row) * N + col] : 0.0f;
          }
    }
    if constexpr (SPLIT > 1) {
      if (rank > 0) {
        hopper::mbar_wait_cluster(handed, handed_phase);
        handed_phase ^= 1;
#pragma unroll
        for (int i = 0; i < SUB; ++i)
#pragma unroll
          for (int f = 0; f < F; ++f) total[i][f] = *hand_off_at(i, f);
        for (int h = 0; h < held; ++h)
#pragma unroll
          for (int i = 0; i < SUB; ++i)
#pragma unroll
            for (int f = 0; f < F; ++f) total[i][f] += run[h][i][f];
      }
      if (rank < SPLIT - 1) {
#pragma unroll
        for (int i = 0; i < SUB; ++i)
#pragma unroll
          for (int f = 0; f < F; ++f)
            hopper::cluster_store(hopper::cluster_address(hand_off_at(i, f), rank + 1), total[i][f]);
        hopper::cluster_arrive(hopper::cluster_address(handed, rank + 1));
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < SUB; ++i) {
      const int block = tile * (CONS * SUB) + half * SUB + i;
      if (out.act) {
        // Warp w's 16 columns are one gate/up block: lane g holds gate (e < 2) and up (e ≥ 2) of one feature.
        const int ffn = N / 2, f = block * 32 + warp * 8 + g;
#pragma unroll
        for (int j = 0; j < TOK / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int row = j * 8 + 2 * t + e;
            if (row < M && f < ffn) store_swiglu(out, ffn, row, f, total[i][j * 4 + e], total[i][j * 4 + e + 2]);
          }
        continue;
      }
#pragma unroll
      for (int j = 0; j < TOK / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int row, col;
          if (element(i, j, e, row, col))
            out.y[size_t(row) * N + col] =
                out_value(out.bias, col, total[i][j * 4 + e], old[i][j * 4 + e], out.accumulate);
        }
    }
  }
#else
  __trap();  // built without sm_90a
#endif
}

template <bool F16, int TOK, int STAGES, int SPLIT, int CONS = 1, int BOXES = 1, int SUB = 1>
void launch_wgmma_rows(const uint16_t* x, const uint16_t* w, const GemmOut& out, int m, int n, int k, void* stream) {
  if (k == 0) return launch_tiled<F16, 4, 4, 2, 4, 2, 3>(x, w, out, m, n, k, stream);
  using W = WgmmaRows<TOK, STAGES, SPLIT, CONS, BOXES, SUB>;
  // Steps of several k boxes need whole steps: other k goes to one box a step (the same sums).
  if (BOXES > 1 && k % W::kStepK != 0)
    return launch_wgmma_rows<F16, TOK, STAGES * BOXES, SPLIT, CONS, 1, SUB>(x, w, out, m, n, k, stream);
  // A cluster CTA holds at most kMaxRunSlices slices apart: longer k goes to the unsplit kernel.
  if (SPLIT > 1 && W::slices(k) > SPLIT * W::kMaxRunSlices)
    return launch_wgmma_rows<F16, TOK, STAGES, 1, CONS, BOXES, SUB>(x, w, out, m, n, k, stream);
  // More rows than a tile holds (tests, benchmarks): tiles of TOK rows one after another, each row's bits unchanged.
  if (m > TOK) {
    launch_wgmma_rows<F16, TOK, STAGES, SPLIT, CONS, BOXES, SUB>(x, w, out, TOK, n, k, stream);
    return launch_wgmma_rows<F16, TOK, STAGES, SPLIT, CONS, BOXES, SUB>(x + size_t(TOK) * k, w,
                                                                        out.after_rows(TOK, n), m - TOK, n, k, stream);
  }
  auto kernel = wgmma_rows_kernel<F16, TOK, STAGES, SPLIT, CONS, BOXES, SUB>;
  allow_shared_memory_once(kernel, unsigned(W::kSmemBytes), "gemm wgmma rows", true);
  // One tile per cluster when split (the hand-off barrier counts one tile); persistent CTAs otherwise.
  const int tiles = (n + W::kCols - 1) / W::kCols;
  const int most = multiprocessor_count("the wgmma GEMM") * W::per_multiprocessor();
  const int ctas = SPLIT > 1 ? tiles * SPLIT : (tiles < most ? tiles : most);
  launch_overlapping_kernel("gemm wgmma rows", kernel, dim3(ctas), dim3(W::kThreads), unsigned(W::kSmemBytes), stream,
                            weight_tensor_map(w, n, k, W::kCols, out, F16), wgmma_tensor_map(x, m, k, TOK, F16), out,
                            m, n, k);
}

}  // namespace fs::cuda::kernels::gemm_detail

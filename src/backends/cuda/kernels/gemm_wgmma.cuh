#pragma once
// Hopper GEMM for many rows: persistent and warp-specialized. Each CTA walks output tiles of 128 rows × COLS columns;
// one producer thread streams the tiles' 64-wide k steps of x and w into a ring of shared-memory stages with the
// bulk tensor copy engine (128-byte swizzle; rows and k past the end zero-filled), each stage completed by an
// mbarrier, and two consumer warpgroups multiply 64 rows each on wgmma (bf16 in, or f16 with F16; f32 accumulate)
// and free the stage. Each k slice of 2048 is summed from zero in `acc` and added onto `total` at the slice's end, in
// slice order; 256-column tiles keep half of `total` in shared memory (the registers hold the slice's sum and the
// other half).
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/driver_table.h"
#include "backends/cuda/kernels/gemm_common.cuh"
#include "backends/cuda/kernels/gemm_tiled.cuh"
#include "backends/cuda/kernels/hopper_ptx.cuh"

namespace fs::cuda::kernels::gemm_detail {

template <int COLS, int STAGES>
struct Wgmma {
  static constexpr int kRows = 128, kCols = COLS, kStepK = 64, kStages = STAGES;
  static constexpr int kThreads = 384;  // warpgroup 0 produces, warpgroups 1 and 2 consume
  static constexpr int kStepsPerSlice = kSliceBlocks * 32 / kStepK;
  static constexpr uint32_t kOperandBytes = kRows * kStepK * 2;
  static constexpr uint32_t kStageBytes = kOperandBytes + kCols * kStepK * 2;
  static constexpr int kFrag = COLS / 2;                   // accumulator floats per consumer thread
  static constexpr int kHeld = COLS > 192 ? kFrag / 2 : kFrag;  // of the running total, in registers
  static constexpr int kConsumerThreads = 256;
  static constexpr size_t kBarrierBytes = 2 * kStages * sizeof(uint64_t);
  static constexpr size_t kTotalBytes = size_t(kFrag - kHeld) * kConsumerThreads * sizeof(float);
  static constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + kBarrierBytes + kTotalBytes + 1024;
  static_assert(COLS == 128 || COLS == 192 || COLS == 256, "wgmma_m64k16 exists for n = 128, 192 and 256");
};

// Copies the weights' box of `rows` rows from row n0 at k: a plain 2-d box, or for a gate|up matrix its rows read
// gate/up interleaved in blocks of kGateUpBlock (gate_up_tensor_map), so row 16b + i of the box is gate row 8b + i
// and row 16b + 8 + i up row 8b + i.
__device__ __forceinline__ void load_weight_box(void* dst, const CUtensorMap* map, uint64_t* bar, int k, int n0,
                                                bool gate_up) {
  if (gate_up) hopper::tma_load_4d(dst, map, bar, k, 0, 0, n0 / (2 * kGateUpBlock));
  else hopper::tma_load_2d(dst, map, bar, k, n0);
}

// One 64-wide k step of a slice's sum (every wgmma GEMM's arithmetic): four k16 steps onto acc in order, the slice's
// first step starting from zero; committed as one wgmma group.
template <bool F16, int N>
__device__ __forceinline__ void wgmma_k64_step(float (&acc)[N], uint64_t a, uint64_t b, bool slice_start) {
  hopper::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) hopper::wgmma_m64k16<F16>(acc, a + 2 * kk, b + 2 * kk, !(slice_start && kk == 0));
  hopper::wgmma_commit();
}

template <bool F16, int COLS, int STAGES>
__global__ void __launch_bounds__(384, 1)
    wgmma_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w, GemmOut out,
                 int M, int N, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using W = Wgmma<COLS, STAGES>;
  extern __shared__ uint8_t smem_raw[];
  // Swizzled tiles need 1024-byte alignment.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + W::kStages * W::kStageBytes);
  uint64_t* empty = full + W::kStages;
  // Float i ≥ kHeld of consumer thread c's running total: shared_total[(i − kHeld) · 256 + c].
  float* shared_total = reinterpret_cast<float*>(smem + W::kStages * W::kStageBytes + W::kBarrierBytes);
  const int warpgroup = threadIdx.x / 128;
  const int m_tiles = (M + W::kRows - 1) / W::kRows, tiles = m_tiles * ((N + W::kCols - 1) / W::kCols);
  const int steps = (K + W::kStepK - 1) / W::kStepK;

  if (threadIdx.x == 0) {
    hopper::prefetch_tensor_map(&map_x);
    hopper::prefetch_tensor_map(&map_w);
    for (int s = 0; s < W::kStages; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], 8);  // lane 0 of each consumer warp
    }
    hopper::mbar_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    hopper::set_max_registers_dec<40>();
    if (threadIdx.x != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    // Tiles in column-major order: consecutive CTAs share a weight tile.
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int m0 = (tile % m_tiles) * W::kRows, n0 = (tile / m_tiles) * W::kCols;
      for (int step = 0; step < steps; ++step) {
        hopper::mbar_wait(&empty[stage], phase ^ 1);
        uint8_t* st = smem + stage * W::kStageBytes;
        hopper::mbar_arrive_expect_tx(&full[stage], W::kStageBytes);
        hopper::tma_load_2d(st, &map_x, &full[stage], step * W::kStepK, m0);
        load_weight_box(st + W::kOperandBytes, &map_w, &full[stage], step * W::kStepK, n0, out.act != nullptr);
        if (++stage == W::kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  hopper::set_max_registers_inc<232>();
  const int consumer = warpgroup - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  int stage = 0;
  uint32_t phase = 0;
  float acc[W::kFrag], total[W::kHeld];
  float* spilled = shared_total + (threadIdx.x - 128);  // this thread's floats past kHeld, kConsumerThreads apart
  auto release = [&](int s) {
    if (s >= 0 && lane == 0) hopper::mbar_arrive(&empty[s]);
  };
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int m0 = (tile % m_tiles) * W::kRows, n0 = (tile / m_tiles) * W::kCols;
#pragma unroll
    for (int i = 0; i < W::kFrag; ++i) {
      acc[i] = 0.0f;
      if (i < W::kHeld) total[i] = 0.0f;
      else spilled[(i - W::kHeld) * W::kConsumerThreads] = 0.0f;
    }
    int pending = -1;  // the stage whose wgmma may still be reading it
    for (int step = 0; step < steps; ++step) {
      hopper::mbar_wait(&full[stage], phase);
      const uint8_t* st = smem + stage * W::kStageBytes;
      const uint64_t a = hopper::smem_desc_sw128(st + consumer * (W::kOperandBytes / 2));
      const uint64_t b = hopper::smem_desc_sw128(st + W::kOperandBytes);
      wgmma_k64_step<F16>(acc, a, b, step % W::kStepsPerSlice == 0);
      // The end of a k slice (or of k): the slice's sum joins the total.
      if ((step + 1) % W::kStepsPerSlice == 0 || step == steps - 1) {
        hopper::wgmma_wait<0>();
        release(pending);
        release(stage);
        pending = -1;
#pragma unroll
        for (int i = 0; i < W::kFrag; ++i) {
          if (i < W::kHeld) total[i] += acc[i];
          else spilled[(i - W::kHeld) * W::kConsumerThreads] += acc[i];
        }
      } else {
        hopper::wgmma_wait<1>();
        release(pending);
        pending = stage;
      }
      if (++stage == W::kStages) stage = 0, phase ^= 1;
    }
    hopper::wgmma_wait<0>();  // already true after the last slice; tells the compiler that `total` is settled
    auto sum = [&](int i) { return i < W::kHeld ? total[i] : spilled[(i - W::kHeld) * W::kConsumerThreads]; };
    const int row0 = m0 + consumer * 64 + warp * 16 + g;
    if (out.act) {
      // Column groups of 8 alternate gate, up: group j (even) holds gate, group j + 1 up, of the same 8 features.
      const int ffn = N / 2;
      const bool act_pairs = ffn % 2 == 0 && reinterpret_cast<uintptr_t>(out.act) % 4 == 0;
#pragma unroll
      for (int j = 0; j < COLS / 8; j += 2)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // gate_at, up_at: where features f and f + 1 keep their gate and up sums.
          const int row = row0 + h * 8, f = n0 / 2 + (j / 2) * 8 + 2 * t, gate_at = j * 4 + 2 * h, up_at = gate_at + 4;
          if (row >= M || f >= ffn) continue;
          if (act_pairs) {
            store_swiglu_pair(out, ffn, row, f, sum(gate_at), sum(up_at), sum(gate_at + 1), sum(up_at + 1));
            continue;
          }
          store_swiglu(out, ffn, row, f, sum(gate_at), sum(up_at));
          if (f + 1 < ffn) store_swiglu(out, ffn, row, f + 1, sum(gate_at + 1), sum(up_at + 1));
        }
      continue;
    }
    // Each thread's two adjacent columns as one 8-byte store when every row starts 8-byte aligned, the old values
    // of kLoadGroups column groups loaded before any of them is stored.
    if (N % 2 == 0 && reinterpret_cast<uintptr_t>(out.y) % 8 == 0) {
      constexpr int kLoadGroups = 4;
      static_assert(COLS / 8 % kLoadGroups == 0, "whole load groups");
#pragma unroll
      for (int j0 = 0; j0 < COLS / 8; j0 += kLoadGroups) {
        float2 old[kLoadGroups][2];
#pragma unroll
        for (int j = 0; j < kLoadGroups; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + h * 8, col = n0 + (j0 + j) * 8 + 2 * t;
            old[j][h] = out.accumulate && row < M && col < N
                            ? *reinterpret_cast<const float2*>(out.y + size_t(row) * N + col)
                            : make_float2(0.0f, 0.0f);
          }
#pragma unroll
        for (int j = 0; j < kLoadGroups; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + h * 8, col = n0 + (j0 + j) * 8 + 2 * t, i = (j0 + j) * 4 + 2 * h;
            if (row < M && col < N)
              store_out_pair(out.y, out.bias, N, row, col, sum(i), sum(i + 1), old[j][h], out.accumulate);
          }
      }
      continue;
    }
#pragma unroll
    for (int j = 0; j < COLS / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + (e / 2) * 8, col = n0 + j * 8 + 2 * t + e % 2;
        if (row < M && col < N) store_out(out.y, out.bias, N, row, col, sum(j * 4 + e), out.accumulate);
      }
  }
#else
  __trap();  // built without sm_90a
#endif
}

// The tensor maps' element type: bf16, or f16 for the F16 kernels.
inline CUtensorMapDataType half_type(bool f16) {
  return f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// A 2-d tensor map over `rows` rows of k halves, read in boxes of 64 k × `box_rows` rows with the 128-byte swizzle.
inline CUtensorMap wgmma_tensor_map(const uint16_t* p, int rows, int k, unsigned box_rows, bool f16) {
  CUtensorMap map{};
  const unsigned long long dims[2] = {static_cast<unsigned long long>(k), static_cast<unsigned long long>(rows)};
  const unsigned long long strides[1] = {static_cast<unsigned long long>(k) * 2};
  const unsigned box[2] = {64, box_rows}, element_strides[2] = {1, 1};
  FS_CU(tensor_map_encode_tiled, &map, half_type(f16), 2,
        const_cast<void*>(static_cast<const void*>(p)), dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

// The weights [gate; up] (2 ffn rows of k halves) as a 4-d tensor map (k, 8 rows of a block, gate or up, block):
// a box of `box_rows` rows holds box_rows / 16 blocks of 8 gate rows each followed by the same 8 rows of up.
inline CUtensorMap gate_up_tensor_map(const uint16_t* p, int rows, int k, unsigned box_rows, bool f16) {
  constexpr unsigned B = kGateUpBlock;
  using u64 = unsigned long long;
  const u64 ffn = static_cast<u64>(rows) / 2, row_bytes = static_cast<u64>(k) * 2;
  CUtensorMap map{};
  const u64 dims[4] = {static_cast<u64>(k), B, 2, ffn / B};
  const u64 strides[3] = {row_bytes, ffn * row_bytes, B * row_bytes};
  const unsigned box[4] = {64, B, 2, box_rows / (2 * B)}, element_strides[4] = {1, 1, 1, 1};
  FS_CU(tensor_map_encode_tiled, &map, half_type(f16), 4,
        const_cast<void*>(static_cast<const void*>(p)), dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

// The weights' tensor map for a GEMM writing `out`.
inline CUtensorMap weight_tensor_map(const uint16_t* w, int n, int k, unsigned box_rows, const GemmOut& out,
                                     bool f16) {
  return out.act ? gate_up_tensor_map(w, n, k, box_rows, f16) : wgmma_tensor_map(w, n, k, box_rows, f16);
}

template <bool F16, int COLS, int STAGES>
void launch_wgmma(const uint16_t* x, const uint16_t* w, const GemmOut& out, int m, int n, int k, void* stream) {
  // With k = 0 there is no tensor to map and no term to sum: the tiled kernel writes the same bias alone.
  if (k == 0) return launch_tiled<F16, 4, 4, 2, 4, 2, 3>(x, w, out, m, n, k, stream);
  using W = Wgmma<COLS, STAGES>;
  auto kernel = wgmma_kernel<F16, COLS, STAGES>;
  allow_shared_memory_once(kernel, unsigned(W::kSmemBytes), "gemm wgmma", true);
  const int tiles = ((m + W::kRows - 1) / W::kRows) * ((n + W::kCols - 1) / W::kCols);
  const int sms = multiprocessor_count("the wgmma GEMM"), ctas = tiles < sms ? tiles : sms;
  launch_kernel("gemm wgmma", kernel, dim3(ctas), dim3(W::kThreads), unsigned(W::kSmemBytes), stream,
                wgmma_tensor_map(x, m, k, W::kRows, F16), weight_tensor_map(w, n, k, W::kCols, out, F16), out, m, n,
                k);
}

}  // namespace fs::cuda::kernels::gemm_detail

#pragma once
// Device helpers shared by the GEMM kernels: the tensor-core mma, cp.async copies, the output store and the fixed
// k slices that every GEMM configuration sums in the same order.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"

namespace fs::cuda::kernels::gemm_detail {

// k blocks of 32 per slice (2048 k). Each output element is ((p0 + p1) + p2) + … where p_s sums slice s's k blocks
// in increasing order from 0; slices depend on k alone.
constexpr int kSliceBlocks = 64;

using ptx::copy16;
using ptx::copy_commit;
using ptx::copy_wait;
using ptx::mma;

// The two mma of one 32-wide k block: lane t holds k t·8…t·8+7 of its row in a (rows g, g+8) and b (column g).
template <bool F16>
__device__ __forceinline__ void mma_block(float (&c)[4], const uint4& a_lo, const uint4& a_hi, const uint4& b) {
  mma<F16>(c, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  mma<F16>(c, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
}

// Where a GEMM's output goes: y[m, n] (=|+=) the sums (+ bias), or, when `act` is set, act[m, n / 2] = the SwiGLU of
// each gate/up pair, the weights' rows read gate/up interleaved in blocks of 8 (GateUpBlock).
struct GemmOut {
  const float* bias = nullptr;
  float* y = nullptr;
  bool accumulate = false;
  uint16_t* act = nullptr;

  // The output of the rows from `rows` on, for a GEMM of n columns.
  GemmOut after_rows(int rows, int n) const {
    GemmOut o = *this;
    if (act) o.act += size_t(rows) * (n / 2);
    else o.y += size_t(rows) * n;
    return o;
  }
};

// Rows of gate, then as many of up, per 16-row block of the interleaved weights.
constexpr int kGateUpBlock = 8;

// The value an output element takes: v + bias, added onto `old` (its value before) when accumulating. Epilogues
// load the old values of several elements before storing any, so the loads' latencies overlap.
__device__ __forceinline__ float out_value(const float* bias, int col, float v, float old, bool accumulate) {
  v += bias ? bias[col] : 0.0f;
  return accumulate ? old + v : v;
}

// Stores one output element: y (=|+=) v + bias.
__device__ __forceinline__ void store_out(float* y, const float* bias, int N, int row, int col, float v,
                                          bool accumulate) {
  float* out = y + size_t(row) * N + col;
  *out = out_value(bias, col, v, accumulate ? *out : 0.0f, accumulate);
}

// Stores output elements (row, col) and (row, col + 1) in one 8-byte access (col even, N even), `old` their values
// before (read when accumulating).
__device__ __forceinline__ void store_out_pair(float* y, const float* bias, int N, int row, int col, float v0,
                                               float v1, float2 old, bool accumulate) {
  *reinterpret_cast<float2*>(y + size_t(row) * N + col) =
      make_float2(out_value(bias, col, v0, old.x, accumulate), out_value(bias, col + 1, v1, old.y, accumulate));
}

// Stores the SwiGLU of the gate/up sums of feature f (of ffn) in row `row`.
__device__ __forceinline__ void store_swiglu(const GemmOut& out, int ffn, int row, int f, float g, float u) {
  out.act[size_t(row) * ffn + f] = swiglu_bits(g, u);
}

// Stores features f and f + 1 as store_swiglu does, in one 4-byte access (f even, ffn even).
__device__ __forceinline__ void store_swiglu_pair(const GemmOut& out, int ffn, int row, int f, float g0, float u0,
                                                  float g1, float u1) {
  const uint32_t bits = uint32_t(swiglu_bits(g0, u0)) | uint32_t(swiglu_bits(g1, u1)) << 16;
  *reinterpret_cast<uint32_t*>(out.act + size_t(row) * ffn + f) = bits;
}

}  // namespace fs::cuda::kernels::gemm_detail

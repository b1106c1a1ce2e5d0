#pragma once
// Device helpers shared by the GEMM kernels: the tensor-core mma, 16-byte loads and cp.async copies, and the fixed
// k slices that every GEMM configuration sums in the same order.
#include "backends/cuda/kernels/common.cuh"

namespace fs::cuda::kernels::gemm_detail {

// k blocks of 32 per slice (1024 k). Each output element is ((p0 + p1) + p2) + … where p_s sums slice s's k blocks
// in increasing order from 0; slices depend on k alone.
constexpr int kSliceBlocks = 32;

__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The two mma of one 32-wide k block: lane t holds k t·8…t·8+7 of its row in a (rows g, g+8) and b (column g).
__device__ __forceinline__ void mma_block(float (&c)[4], const uint4& a_lo, const uint4& a_hi, const uint4& b) {
  mma(c, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  mma(c, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
}

// 16-byte global → shared copy; bytes past `valid` (0 or 16) are zero-filled.
__device__ __forceinline__ void copy16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint4 load16(const uint16_t* p, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// Weights are read once: past L1, asking L2 to fetch the 256 bytes around each request.
__device__ __forceinline__ uint4 load16_weights(const uint16_t* p, bool valid) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (valid)
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}

// Stores one output element: y (=|+=) v + bias.
__device__ __forceinline__ void store_out(float* y, const float* bias, int N, int row, int col, float v,
                                          bool accumulate) {
  v += bias ? bias[col] : 0.0f;
  float* out = y + size_t(row) * N + col;
  *out = accumulate ? *out + v : v;
}

}  // namespace fs::cuda::kernels::gemm_detail

#pragma once
// The emulated counterpart of src/backends/cuda/kernels/mma_ptx.cuh: mma.sync m16n8k16 (bf16) and m16n8k8 (tf32),
// ldmatrix, cp.async and tf32 rounding as PTX defines their fragments and groups, over the emulated warp
// (tests/cuda_emulated/emulated_cuda.h).
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace fs::cuda::kernels::ptx {

namespace detail {

// Half `high` of a word of two bf16 values, as a float.
inline float bf16_half(uint32_t word, int high) { return fs::bf16_to_f32(uint16_t(high ? word >> 16 : word)); }

// The rows ldmatrix's lanes point at (lane l: row l % 8 of matrix l / 8), into r as the instruction lays them out.
inline void ldmatrix(uint32_t (&r)[4], const uint16_t* p, bool transposed) {
  uint32_t address[2];
  const auto at = reinterpret_cast<uint64_t>(p);
  address[0] = uint32_t(at);
  address[1] = uint32_t(at >> 32);
  const uint32_t* all = emulated::post(address, 2);
  auto row = [&](int l) {
    return reinterpret_cast<const uint16_t*>(uint64_t(all[size_t(l) * 8]) | uint64_t(all[size_t(l) * 8 + 1]) << 32);
  };
  const int lane = emulated::lane();
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (transposed) {
      lo = row(8 * i + 2 * (lane % 4))[lane / 4];
      hi = row(8 * i + 2 * (lane % 4) + 1)[lane / 4];
    } else {
      lo = row(8 * i + lane / 4)[2 * (lane % 4)];
      hi = row(8 * i + lane / 4)[2 * (lane % 4) + 1];
    }
    r[i] = uint32_t(lo) | uint32_t(hi) << 16;
  }
  emulated::release();
}

inline void enqueue(void* smem, const void* gmem, int bytes, bool valid) {
  emulated::current().open_group.push_back({smem, gmem, bytes, valid});
}

// One mma step of the warp: the first lane past the exchange has `fill(all, product)` write the 16×8 product of the
// six words each lane posted; every lane adds its four elements to c.
template <class Fill>
inline void mma_step(float (&c)[4], const uint32_t (&mine)[6], Fill fill) {
  const uint32_t* all = emulated::post(mine, 6);
  emulated::Block& block = emulated::block();
  const size_t w = size_t(emulated::warp());
  float* product = block.tiles.data() + w * 128;
  if (block.tile_generation[w] != block.warp_generation[w]) {
    block.tile_generation[w] = block.warp_generation[w];
    fill(all, product);
  }
  const int lane = emulated::lane();
  for (int e = 0; e < 4; ++e) c[e] += product[(lane / 4 + 8 * (e / 2)) * 8 + 2 * (lane % 4) + e % 2];
  emulated::release();
}

}  // namespace detail

// c += a·b for one m16n8k16 tile (bf16 operands; the f16 form is not emulated). The warp's first lane past the
// exchange computes the 16×8 product a·b, each sum over k in order; every lane adds its four elements to c.
template <bool F16 = false>
inline void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  static_assert(!F16, "the emulation has no f16 mma");
  const uint32_t mine[6] = {a0, a1, a2, a3, b0, b1};
  detail::mma_step(c, mine, [](const uint32_t* all, float* product) {
    // A[m][k] is in lane (m % 8)·4 + (k % 8) / 2, register m / 8 + 2·(k / 8); B[k][n] in lane n·4 + (k % 8) / 2,
    // register 4 + k / 8; each word's low half holds the even k.
    float a[16][16], b[16][8];
    auto word = [&](int lane, int reg) { return all[size_t(lane) * 8 + size_t(reg)]; };
    for (int m = 0; m < 16; ++m)
      for (int k = 0; k < 16; ++k)
        a[m][k] = detail::bf16_half(word((m % 8) * 4 + (k % 8) / 2, m / 8 + 2 * (k / 8)), k % 2);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; ++n) b[k][n] = detail::bf16_half(word(n * 4 + (k % 8) / 2, 4 + k / 8), k % 2);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float sum = 0.0f;
        for (int k = 0; k < 16; ++k) sum += a[m][k] * b[k][n];
        product[m * 8 + n] = sum;
      }
  });
}
inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma(c, a[0], a[1], a[2], a[3], b0, b1);
}

// c += a·b for one m16n8k8 tile of tf32 operands, as mma above: A[m][k] in lane (m % 8)·4 + k % 4, register m / 8 +
// 2·(k / 4); B[k][n] in lane n·4 + k % 4, register 4 + k / 4. Each operand's low 13 bits are ignored, as the tensor
// cores ignore them.
inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  detail::mma_step(c, mine, [](const uint32_t* all, float* product) {
    auto value = [&](int lane, int reg) {
      float f;
      const uint32_t bits = all[size_t(lane) * 8 + size_t(reg)] & 0xffffe000u;
      std::memcpy(&f, &bits, 4);
      return f;
    };
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float sum = 0.0f;
        for (int k = 0; k < 8; ++k)
          sum += value((m % 8) * 4 + k % 4, m / 8 + 2 * (k / 4)) * value(n * 4 + k % 4, 4 + k / 4);
        product[m * 8 + n] = sum;
      }
  });
}

// x rounded to tf32 (nearest, ties away from zero: 10 fraction bits kept), as the bits of a float.
inline uint32_t tf32_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;
  return (bits + 0x1000u) & 0xffffe000u;
}

inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* p) { detail::ldmatrix(r, p, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* p) { detail::ldmatrix(r, p, true); }

inline void copy16(void* smem, const void* gmem, bool valid) { detail::enqueue(smem, gmem, 16, valid); }
inline void copy4(void* smem, const void* gmem, bool valid) { detail::enqueue(smem, gmem, 4, valid); }
inline void copy_commit() {
  emulated::Fiber& f = emulated::current();
  f.groups.push_back(std::move(f.open_group));
  f.open_group.clear();
}
// The thread's groups but the newest N land (zeros for an invalid source).
template <int N>
inline void copy_wait() {
  auto& groups = emulated::current().groups;
  while (int(groups.size()) > N) {
    for (const emulated::Copy& c : groups.front()) {
      if (c.valid) std::memcpy(c.dst, c.src, size_t(c.bytes));
      else std::memset(c.dst, 0, size_t(c.bytes));
    }
    groups.erase(groups.begin());
  }
}

inline uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(fs::f32_to_bf16(lo)) | uint32_t(fs::f32_to_bf16(hi)) << 16;
}

}  // namespace fs::cuda::kernels::ptx

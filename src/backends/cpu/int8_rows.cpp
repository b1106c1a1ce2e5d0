#include "backends/cpu/int8_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/thread_pool.h"

#define FS_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

namespace fs::cpu {

namespace {

// Multiply-adds below which an int8 matmul runs on the calling thread.
constexpr size_t kSerialWork = 200000;

// Each input row to 0..255 over its own range and 0: xq = round(x / step) + zero[m], step[m] = (hi − lo) / 255 with
// lo = min(0, min x), hi = max(0, max x) (1 for a row of zeros), zero[m] = round(−lo / step).
void quantize_inputs(const float* x, int rows, int K, uint8_t* xq, float* step, int32_t* zero) {
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + size_t(m) * size_t(K);
    uint8_t* qr = xq + size_t(m) * size_t(K);
    __m256 lo8 = _mm256_set1_ps(xr[0]), hi8 = lo8;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
      const __m256 v = _mm256_loadu_ps(xr + k);
      lo8 = _mm256_min_ps(lo8, v);
      hi8 = _mm256_max_ps(hi8, v);
    }
    float lo_lanes[8], hi_lanes[8];
    _mm256_storeu_ps(lo_lanes, lo8);
    _mm256_storeu_ps(hi_lanes, hi8);
    float lo = *std::min_element(lo_lanes, lo_lanes + 8), hi = *std::max_element(hi_lanes, hi_lanes + 8);
    for (; k < K; ++k) lo = std::min(lo, xr[k]), hi = std::max(hi, xr[k]);
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
    step[m] = hi > lo ? (hi - lo) / 255.0f : 1.0f;
    const float inv = 1.0f / step[m];
    zero[m] = int32_t(std::clamp(std::lrint(-lo * inv), 0L, 255L));
    const __m256 inv8 = _mm256_set1_ps(inv);
    const __m256i zp = _mm256_set1_epi32(zero[m]), floor = _mm256_setzero_si256(), ceil = _mm256_set1_epi32(255);
    k = 0;
    for (; k + 8 <= K; k += 8) {
      __m256i v = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k), inv8)), zp);
      v = _mm256_min_epi32(_mm256_max_epi32(v, floor), ceil);
      int32_t out[8];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
      for (int t = 0; t < 8; ++t) qr[k + t] = uint8_t(out[t]);
    }
    for (; k < K; ++k) qr[k] = uint8_t(std::clamp(std::lrint(xr[k] * inv) + zero[m], 0L, 255L));
  }
}

// R input rows against NB blocks of kInt8Block weight rows: sums[r][b * 16 + i] = Σ_k xq[r, k] · w[row i of block b, k].
template <int R, int NB>
FS_VNNI void tile(const uint8_t* xq, int K, const int8_t* blocks, int32_t* sums) {
  const size_t block_bytes = size_t(K) * kInt8Block;
  __m512i acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_si512();
  for (int k = 0; k < K; k += 4) {
    __m512i xv[R];
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, xq + size_t(r) * size_t(K) + size_t(k), 4);
      xv[r] = _mm512_set1_epi32(four);
    }
    for (int b = 0; b < NB; ++b) {
      const __m512i w = _mm512_loadu_si512(blocks + size_t(b) * block_bytes + size_t(k) * kInt8Block);
      for (int r = 0; r < R; ++r) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], xv[r], w);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < NB; ++b)
      _mm512_storeu_si512(sums + size_t(r) * NB * kInt8Block + size_t(b) * kInt8Block, acc[r][b]);
}

// Scalar sums for CPUs without AVX-512 VNNI: the same integers.
void tile_scalar(const uint8_t* xq, int K, const int8_t* block, int32_t* sums) {
  for (int i = 0; i < kInt8Block; ++i) {
    int32_t s = 0;
    for (int k = 0; k < K; k += 4)
      for (int t = 0; t < 4; ++t)
        s += int32_t(xq[k + t]) * int32_t(block[size_t(k) * kInt8Block + size_t(i) * 4 + size_t(t)]);
    sums[i] = s;
  }
}

}  // namespace

bool int8_vnni_available() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  return yes;
}

bool int8_fits(const WeightMatrix& w) {
  return w.rows > 0 && w.cols > 0 && w.rows % kInt8Block == 0 && w.cols % 4 == 0;
}

std::shared_ptr<const Int8Rows> quantize_rows(const WeightMatrix& w) {
  auto q = std::make_shared<Int8Rows>();
  q->rows = w.rows;
  q->cols = w.cols;
  const size_t K = size_t(w.cols);
  void* mem = std::aligned_alloc(64, size_t(w.rows) * K);
  if (!mem) throw std::bad_alloc();
  q->packed = std::shared_ptr<int8_t[]>(static_cast<int8_t*>(mem), std::free);
  q->scale = std::make_unique<float[]>(size_t(w.rows));
  q->sum = std::make_unique<int32_t[]>(size_t(w.rows));
  std::vector<float> row(K);
  for (int n = 0; n < w.rows; ++n) {
    w.row_to_f32(n, row.data());
    float amax = 0.0f;
    for (float v : row) amax = std::max(amax, std::fabs(v));
    const float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
    q->scale[size_t(n)] = scale;
    int8_t* block = q->packed.get() + size_t(n / kInt8Block) * K * kInt8Block + size_t(n % kInt8Block) * 4;
    int32_t sum = 0;
    for (size_t k = 0; k < K; ++k) {
      const int v = int(std::clamp(std::lrint(row[k] / scale), -127L, 127L));
      block[k / 4 * 4 * kInt8Block + k % 4] = int8_t(v);
      sum += v;
    }
    q->sum[size_t(n)] = sum;
  }
  return q;
}

void matmul_int8(const float* x, int rows, const Int8Rows& w, const float* bias, float* y, bool vnni) {
  const int K = w.cols;
  const size_t N = size_t(w.rows), blocks = N / kInt8Block, block_bytes = size_t(K) * kInt8Block;
  std::vector<uint8_t> xq(size_t(rows) * size_t(K));
  std::vector<float> step(static_cast<size_t>(rows));
  std::vector<int32_t> zero(static_cast<size_t>(rows));
  quantize_inputs(x, rows, K, xq.data(), step.data(), zero.data());
  // Rows [m, m + R) against blocks [b, b + NB): integer sums, then scaled into y.
  auto finish = [&](int m, int R, size_t b, int NB, const int32_t* sums) {
    for (int r = 0; r < R; ++r) {
      const __m256 step8 = _mm256_set1_ps(step[size_t(m + r)]);
      const __m256i zero8 = _mm256_set1_epi32(zero[size_t(m + r)]);
      const int32_t* sr = sums + size_t(r) * size_t(NB) * kInt8Block;
      float* yr = y + size_t(m + r) * N + b * kInt8Block;
      for (int i = 0; i < NB * kInt8Block; i += 8) {
        const size_t n = b * kInt8Block + size_t(i);
        const __m256i corrected = _mm256_sub_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sr + i)),
            _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sum.get() + n)), zero8));
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(step8, _mm256_loadu_ps(w.scale.get() + n)),
                                 _mm256_cvtepi32_ps(corrected));
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + n));
        _mm256_storeu_ps(yr + i, v);
      }
    }
  };
  auto body = [&](size_t b0, size_t b1) {
    int32_t sums[4 * 8 * kInt8Block];
    for (int m = 0; m < rows;) {
      const int R = std::min(rows - m, 4);
      const uint8_t* xm = xq.data() + size_t(m) * size_t(K);
      size_t b = b0;
      if (vnni) {
        // Eight blocks per tile for one or two rows (independent sums hide the instruction's latency), else four.
        const int NB = R <= 2 ? 8 : 4;
        for (; b + size_t(NB) <= b1; b += size_t(NB)) {
          const int8_t* wb = w.packed.get() + b * block_bytes;
          switch (R) {
            case 1: tile<1, 8>(xm, K, wb, sums); break;
            case 2: tile<2, 8>(xm, K, wb, sums); break;
            case 3: tile<3, 4>(xm, K, wb, sums); break;
            default: tile<4, 4>(xm, K, wb, sums); break;
          }
          finish(m, R, b, NB, sums);
        }
        for (; b < b1; ++b) {
          const int8_t* wb = w.packed.get() + b * block_bytes;
          switch (R) {
            case 1: tile<1, 1>(xm, K, wb, sums); break;
            case 2: tile<2, 1>(xm, K, wb, sums); break;
            case 3: tile<3, 1>(xm, K, wb, sums); break;
            default: tile<4, 1>(xm, K, wb, sums); break;
          }
          finish(m, R, b, 1, sums);
        }
      } else {
        for (; b < b1; ++b)
          for (int r = 0; r < R; ++r) {
            tile_scalar(xm + size_t(r) * size_t(K), K, w.packed.get() + b * block_bytes, sums);
            finish(m + r, 1, b, 1, sums);
          }
      }
      m += R;
    }
  };
  if (size_t(rows) * N * size_t(K) < kSerialWork) return body(0, blocks);
  ThreadPool::global().parallel_for(blocks, body);
}

}  // namespace fs::cpu

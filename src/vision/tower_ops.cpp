#include "vision/tower_ops.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "vision/program_weights.h"

namespace fs::vision {

void check_patches(const PixelPatches& px, int64_t tokens, const VisionTowerConfig& c) {
  const int D = c.patch_dim();
  if (px.patch_dim != D || px.values.size() != size_t(tokens) * size_t(D))
    throw Error("pixel patches do not match the vision tower (" + std::to_string(px.patch_dim) + " values per patch, " +
                std::to_string(D) + " expected)");
}

void segment_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                       const std::vector<int>& bounds, int tokens, int heads, int hd, std::vector<float>& out,
                       const CancelFlag* cancel) {
  std::vector<int> segment_of(static_cast<size_t>(tokens), 0);
  for (size_t s = 0; s + 1 < bounds.size(); ++s)
    for (int t = bounds[s]; t < bounds[s + 1]; ++t) segment_of[size_t(t)] = int(s);
  const float scale = 1.0f / std::sqrt(float(hd));
  const size_t stride = size_t(heads) * size_t(hd);
  ThreadPool::global().parallel_for(size_t(tokens) * size_t(heads), [&](size_t begin, size_t end) {
    std::vector<float> scores;
    for (size_t item = begin; item < end; ++item) {
      if (cancel && cancel->load(std::memory_order_relaxed)) return;
      const size_t t = item / size_t(heads), h = item % size_t(heads);
      const int s = segment_of[t], lo = bounds[size_t(s)], n = bounds[size_t(s) + 1] - lo;
      const float* qh = &q[t * stride + h * size_t(hd)];
      scores.resize(size_t(n));
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        scores[size_t(j)] = cpu::dot(qh, &k[size_t(lo + j) * stride + h * size_t(hd)], hd) * scale;
        mx = std::max(mx, scores[size_t(j)]);
      }
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
      float* o = &out[t * stride + h * size_t(hd)];
      std::fill_n(o, hd, 0.0f);
      for (int j = 0; j < n; ++j) cpu::axpy(scores[size_t(j)] / sum, &v[size_t(lo + j) * stride + h * size_t(hd)], o, hd);
    }
  });
  throw_if_cancelled(cancel);
}

void layer_norm(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * size_t(dim);
    float* yr = y + size_t(r) * size_t(dim);
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += xr[i];
    const float mean = float(sum / dim);
    double sq = 0;
    for (int i = 0; i < dim; ++i) sq += double(xr[i] - mean) * double(xr[i] - mean);
    const float inv = float(1.0 / std::sqrt(sq / dim + double(eps)));
    for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}

void gelu_erf(std::vector<float>& x) {
  for (float& m : x) m = 0.5f * m * (1.0f + std::erf(m * float(M_SQRT1_2)));
}

void gelu_tanh(std::vector<float>& x) {
  const float k = float(std::sqrt(2.0 / M_PI));
  for (float& m : x) m = 0.5f * m * (1.0f + std::tanh(k * (m + 0.044715f * m * m * m)));
}

void add_in_place(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

MergerMlpWeights load_merger_mlp(const Checkpoint& ck, const VisionMergerProgram& m) {
  MergerMlpWeights w;
  w.fc1 = load_part_matrix(ck, m.fc1);
  w.fc1_bias = load_part_floats(ck, m.fc1_bias);
  w.fc2 = load_part_matrix(ck, m.fc2);
  w.fc2_bias = load_part_floats(ck, m.fc2_bias);
  return w;
}

std::vector<float> merger_mlp(const MergerMlpWeights& w, const float* xn, int units) {
  std::vector<float> mid(size_t(units) * size_t(w.fc1.rows)), out(size_t(units) * size_t(w.fc2.rows));
  cpu::matmul(xn, units, w.fc1, w.fc1_bias.data(), mid.data());
  gelu_erf(mid);
  cpu::matmul(mid.data(), units, w.fc2, w.fc2_bias.data(), out.data());
  return out;
}

void run_blocks(int depth, const CancelFlag* cancel, const std::function<void(int)>& block) {
  for (int i = 0; i < depth; ++i) {
    throw_if_cancelled(cancel);
    block(i);
  }
  throw_if_cancelled(cancel);
}

}  // namespace fs::vision

#include "models/gated_deltanet.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops.h"
#include "core/thread_pool.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// torch.nn.functional.softplus with beta 1 and threshold 20.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x · rsqrt(Σx² + 1e-6), as transformers' l2norm.
void l2_normalize(float* x, int n) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

size_t DeltaNetWeights::bytes() const {
  return in_qkv.bytes() + in_z.bytes() + in_a.bytes() + in_b.bytes() + out.bytes() +
         (conv.size() + a_log.size() + dt_bias.size() + norm.size()) * sizeof(float);
}

DeltaNetWeights load_deltanet(const Checkpoint& ck, const std::string& p, const DeltaNetShape& s, int hidden) {
  DeltaNetWeights w;
  const int C = s.conv_channels(), V = s.value_channels();
  w.in_qkv = load_matrix(ck, p + "in_proj_qkv.weight", C, hidden);
  w.in_z = load_matrix(ck, p + "in_proj_z.weight", V, hidden);
  w.in_a = load_matrix(ck, p + "in_proj_a.weight", s.value_heads, hidden);
  w.in_b = load_matrix(ck, p + "in_proj_b.weight", s.value_heads, hidden);
  w.out = load_matrix(ck, p + "out_proj.weight", hidden, V);
  w.conv = load_floats(ck, p + "conv1d.weight", {C, 1, s.conv_kernel});
  w.a_log = load_vector(ck, p + "A_log", s.value_heads);
  w.dt_bias = load_vector(ck, p + "dt_bias", s.value_heads);
  w.norm = load_vector(ck, p + "norm.weight", s.value_dim);
  return w;
}

void deltanet_conv(const DeltaNetShape& s, const float* weight, const float* in, int rows, float* tail,
                   std::span<const DeltaNetTap> taps, float* out) {
  const int C = s.conv_channels(), K = s.conv_kernel, past = K - 1;
  std::vector<float> window(size_t(past + rows) * size_t(C));
  std::copy_n(tail, size_t(past) * C, window.data());
  std::copy_n(in, size_t(rows) * C, window.data() + size_t(past) * C);
  for (int t = 0; t < rows; ++t)
    for (int c = 0; c < C; ++c) {
      float acc = 0;
      for (int i = 0; i < K; ++i) acc += weight[size_t(c) * K + size_t(i)] * window[size_t(t + i) * C + size_t(c)];
      out[size_t(t) * C + size_t(c)] = silu(acc);
    }
  for (const DeltaNetTap& tap : taps)
    std::copy_n(window.data() + size_t(tap.after_rows) * C, size_t(past) * C, tap.state);
  std::copy_n(window.data() + size_t(rows) * C, size_t(past) * C, tail);
}

void deltanet_recurrence(const DeltaNetShape& s, float a_log, float dt_bias, const float* conv, const float* a,
                         const float* b, int rows, int h, float* state, std::span<const DeltaNetTap> taps,
                         float* core) {
  const int C = s.conv_channels(), KC = s.key_channels(), V = s.value_channels();
  const int nv = s.value_heads, dk = s.key_dim, dv = s.value_dim, kh = h / (s.value_heads / s.key_heads);
  const float q_scale = float(1.0 / std::sqrt(double(dk)));
  std::vector<float> qv(static_cast<size_t>(dk)), kv(static_cast<size_t>(dk));
  std::vector<float> mem(static_cast<size_t>(dv)), delta(static_cast<size_t>(dv));
  const size_t head_offset = s.conv_state_floats() + size_t(h) * dk * dv;
  float* S = state + head_offset;  // [dk][dv]
  const float A = std::exp(a_log);
  auto tap = taps.begin();
  for (int r = 0; r < rows; ++r) {
    const float* row = conv + size_t(r) * C;
    std::copy_n(row + size_t(kh) * dk, dk, qv.data());
    std::copy_n(row + KC + size_t(kh) * dk, dk, kv.data());
    const float* vv = row + 2 * KC + size_t(h) * dv;
    l2_normalize(qv.data(), dk);
    l2_normalize(kv.data(), dk);
    for (int i = 0; i < dk; ++i) qv[size_t(i)] *= q_scale;
    const float beta = 1.0f / (1.0f + std::exp(-b[size_t(r) * nv + size_t(h)]));
    const float decay = std::exp(-A * softplus(a[size_t(r) * nv + size_t(h)] + dt_bias));
    std::fill(mem.begin(), mem.end(), 0.0f);
    for (int i = 0; i < dk; ++i) {
      float* Si = S + size_t(i) * dv;
      for (int j = 0; j < dv; ++j) {
        Si[j] *= decay;
        mem[size_t(j)] += Si[j] * kv[size_t(i)];
      }
    }
    for (int j = 0; j < dv; ++j) delta[size_t(j)] = (vv[j] - mem[size_t(j)]) * beta;
    float* o = core + size_t(r) * V + size_t(h) * dv;
    std::fill_n(o, dv, 0.0f);
    for (int i = 0; i < dk; ++i) {
      float* Si = S + size_t(i) * dv;
      for (int j = 0; j < dv; ++j) {
        Si[j] += kv[size_t(i)] * delta[size_t(j)];
        o[j] += Si[j] * qv[size_t(i)];
      }
    }
    for (; tap != taps.end() && tap->after_rows == r + 1; ++tap)
      std::copy_n(S, size_t(dk) * dv, tap->state + head_offset);
  }
}

void deltanet_gated_norm(const DeltaNetShape& s, const float* norm, const float* core, const float* z, int rows,
                         float* out) {
  const int dv = s.value_dim;
  for (size_t hr = 0; hr < size_t(rows) * size_t(s.value_heads); ++hr) {
    const float* o = core + hr * dv;
    const float* zr = z + hr * dv;
    float* y = out + hr * dv;
    float ss = 0;
    for (int j = 0; j < dv; ++j) ss += o[j] * o[j];
    const float inv = 1.0f / std::sqrt(ss / float(dv) + s.eps);
    for (int j = 0; j < dv; ++j) y[j] = norm[size_t(j)] * (o[j] * inv) * silu(zr[j]);
  }
}

void deltanet_forward(const DeltaNetWeights& w, const DeltaNetShape& s, const float* x, int T,
                      std::span<const DeltaNetSequence> seqs, float* out) {
  const int C = s.conv_channels(), V = s.value_channels(), nv = s.value_heads;
  std::vector<float> qkv(size_t(T) * C), conv(size_t(T) * C), z(size_t(T) * V), a(size_t(T) * nv), b(size_t(T) * nv);
  std::vector<float> core(size_t(T) * V);
  cpu::matmul(x, T, w.in_qkv, nullptr, qkv.data());
  cpu::matmul(x, T, w.in_z, nullptr, z.data());
  cpu::matmul(x, T, w.in_a, nullptr, a.data());
  cpu::matmul(x, T, w.in_b, nullptr, b.data());
  auto& pool = ThreadPool::global();
  pool.parallel_for(seqs.size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const DeltaNetSequence& q = seqs[i];
      if (q.fresh) std::fill_n(q.state, s.state_floats(), 0.0f);
      const size_t off = size_t(q.first_row) * C;
      deltanet_conv(s, w.conv.data(), qkv.data() + off, q.rows, q.state, q.taps, conv.data() + off);
    }
  });
  // One item per (sequence, value head): its tokens in order through its own dk × dv state.
  pool.parallel_for(seqs.size() * size_t(nv), [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const DeltaNetSequence& q = seqs[item / size_t(nv)];
      const int h = int(item % size_t(nv));
      const size_t r = size_t(q.first_row);
      deltanet_recurrence(s, w.a_log[size_t(h)], w.dt_bias[size_t(h)], conv.data() + r * C, a.data() + r * nv,
                          b.data() + r * nv, q.rows, h, q.state, q.taps, core.data() + r * V);
    }
  });
  pool.parallel_for(size_t(T), [&](size_t begin, size_t end) {
    deltanet_gated_norm(s, w.norm.data(), core.data() + begin * V, z.data() + begin * V, int(end - begin),
                        core.data() + begin * V);
  });
  cpu::matmul(core.data(), T, w.out, nullptr, out);
}

}  // namespace fs

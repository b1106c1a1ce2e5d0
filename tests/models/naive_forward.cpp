#include "naive_forward.h"

#include <cmath>
#include <cstring>

#include "models/rope_table.h"

namespace fs::test {
namespace {

using Mat = std::vector<double>;

Mat tensor(const Checkpoint& ck, const std::string& name) {
  TensorView t = ck.get(name);
  size_t n = 1;
  for (auto d : t.shape()) n *= size_t(d);
  Mat out(n);
  const auto* b = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < n; ++i) {
    if (t.dtype() == DType::F32) {
      float f;
      std::memcpy(&f, b + 4 * i, 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      out[i] = t.dtype() == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return out;
}

// y[T, N] = x[T, K] · W[N, K]ᵀ
Mat linear(const Mat& x, size_t T, const Mat& w, size_t N, size_t K, const Mat* bias = nullptr) {
  Mat y(T * N);
  for (size_t t = 0; t < T; ++t)
    for (size_t n = 0; n < N; ++n) {
      double s = bias ? (*bias)[n] : 0.0;
      for (size_t k = 0; k < K; ++k) s += x[t * K + k] * w[n * K + k];
      y[t * N + n] = s;
    }
  return y;
}

void rmsnorm(Mat& x, size_t rows, size_t dim, const Mat& w, double eps) {
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (size_t i = 0; i < dim; ++i) x[r * dim + i] *= inv * w[i];
  }
}

void rotate(Mat& x, size_t T, size_t heads, size_t hd, const std::vector<float>& inv_freq) {
  for (size_t t = 0; t < T; ++t)
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < hd / 2; ++i) {
        double a = double(t) * inv_freq[i];
        double* v = &x[(t * heads + h) * hd];
        double x1 = v[i], x2 = v[i + hd / 2];
        v[i] = x1 * std::cos(a) - x2 * std::sin(a);
        v[i + hd / 2] = x2 * std::cos(a) + x1 * std::sin(a);
      }
}

}  // namespace

std::vector<double> naive_forward(const ModelConfig& c, const Checkpoint& ck, const std::vector<int32_t>& ids,
                                  bool qkv_bias, bool qk_norm) {
  const size_t T = ids.size(), H = size_t(c.hidden_size), hd = size_t(c.head_dim), nh = size_t(c.num_heads);
  const size_t kvh = size_t(c.num_kv_heads), F = size_t(c.intermediate_size), V = size_t(c.vocab_size);
  Mat emb = tensor(ck, "model.embed_tokens.weight");
  Mat x(T * H);
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < H; ++i) x[t * H + i] = emb[size_t(ids[t]) * H + i];
  auto inv_freq = rope_inv_freq(c.rope, c.head_dim);
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Mat h = x;
    rmsnorm(h, T, H, tensor(ck, p + "input_layernorm.weight"), c.rms_norm_eps);
    Mat qb, kb, vb;
    if (qkv_bias) {
      qb = tensor(ck, p + "self_attn.q_proj.bias");
      kb = tensor(ck, p + "self_attn.k_proj.bias");
      vb = tensor(ck, p + "self_attn.v_proj.bias");
    }
    Mat q = linear(h, T, tensor(ck, p + "self_attn.q_proj.weight"), nh * hd, H, qkv_bias ? &qb : nullptr);
    Mat k = linear(h, T, tensor(ck, p + "self_attn.k_proj.weight"), kvh * hd, H, qkv_bias ? &kb : nullptr);
    Mat v = linear(h, T, tensor(ck, p + "self_attn.v_proj.weight"), kvh * hd, H, qkv_bias ? &vb : nullptr);
    if (qk_norm) {
      rmsnorm(q, T * nh, hd, tensor(ck, p + "self_attn.q_norm.weight"), c.rms_norm_eps);
      rmsnorm(k, T * kvh, hd, tensor(ck, p + "self_attn.k_norm.weight"), c.rms_norm_eps);
    }
    rotate(q, T, nh, hd, inv_freq);
    rotate(k, T, kvh, hd, inv_freq);
    Mat att(T * nh * hd, 0.0);
    for (size_t t = 0; t < T; ++t)
      for (size_t hh = 0; hh < nh; ++hh) {
        size_t g = hh / (nh / kvh);
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j <= t; ++j) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i) d += q[(t * nh + hh) * hd + i] * k[(j * kvh + g) * hd + i];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= t; ++j)
          for (size_t i = 0; i < hd; ++i) att[(t * nh + hh) * hd + i] += s[j] / sum * v[(j * kvh + g) * hd + i];
      }
    Mat o = linear(att, T, tensor(ck, p + "self_attn.o_proj.weight"), H, nh * hd);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    rmsnorm(h, T, H, tensor(ck, p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    Mat gate = linear(h, T, tensor(ck, p + "mlp.gate_proj.weight"), F, H);
    Mat up = linear(h, T, tensor(ck, p + "mlp.up_proj.weight"), F, H);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    Mat d = linear(gate, T, tensor(ck, p + "mlp.down_proj.weight"), H, F);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  rmsnorm(x, T, H, tensor(ck, "model.norm.weight"), c.rms_norm_eps);
  Mat head = ck.has("lm_head.weight") ? tensor(ck, "lm_head.weight") : emb;
  return linear(x, T, head, V, H);
}

}  // namespace fs::test

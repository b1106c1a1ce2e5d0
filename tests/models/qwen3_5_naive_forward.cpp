#include "qwen3_5_naive_forward.h"

#include <cmath>

#include "models/weights_loader.h"

namespace fs::test {
namespace {

using Vec = std::vector<double>;

Vec get(const Checkpoint& ck, const std::string& name) {
  auto t = ck.get(name);
  auto f = load_floats(ck, name, t.shape());
  return Vec(f.begin(), f.end());
}

// y = W x for W [rows, cols].
Vec linear(const Vec& w, const Vec& x, int rows) {
  const size_t cols = x.size();
  Vec y(size_t(rows), 0.0);
  for (size_t r = 0; r < size_t(rows); ++r)
    for (size_t k = 0; k < cols; ++k) y[r] += w[r * cols + k] * x[k];
  return y;
}

Vec rms(const Vec& x, size_t begin, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[begin + i] * x[begin + i];
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[begin + i] / std::sqrt(ss / double(n) + eps);
  return y;
}

double silu(double v) { return v / (1 + std::exp(-v)); }
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

std::vector<double> qwen3_5_naive_forward(const ModelConfig& c, const Qwen35NaiveShape& s, const Checkpoint& ck,
                                          const std::vector<int32_t>& ids) {
  const size_t T = ids.size(), H = size_t(c.hidden_size), V = size_t(c.vocab_size);
  const double eps = c.rms_norm_eps;
  Vec embed = get(ck, "model.embed_tokens.weight");
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) x[t] = Vec(embed.begin() + long(size_t(ids[t]) * H), embed.begin() + long((size_t(ids[t]) + 1) * H));
  auto norm_1p = [&](const Vec& v, const Vec& w) {
    Vec y = rms(v, 0, v.size(), eps);
    for (size_t i = 0; i < y.size(); ++i) y[i] *= 1 + w[i];
    return y;
  };
  for (int li = 0; li < c.num_layers; ++li) {
    const std::string p = "model.layers." + std::to_string(li) + ".";
    Vec in_norm = get(ck, p + "input_layernorm.weight"), post_norm = get(ck, p + "post_attention_layernorm.weight");
    std::vector<Vec> h(T);
    for (size_t t = 0; t < T; ++t) h[t] = norm_1p(x[t], in_norm);
    std::vector<Vec> mixed(T);
    if (s.linear[size_t(li)]) {
      const std::string a = p + "linear_attn.";
      const int nk = s.key_heads, nv = s.value_heads, dk = s.key_dim, dv = s.value_dim, K = s.conv_kernel;
      const int C = 2 * nk * dk + nv * dv;
      Vec wqkv = get(ck, a + "in_proj_qkv.weight"), wz = get(ck, a + "in_proj_z.weight");
      Vec wa = get(ck, a + "in_proj_a.weight"), wb = get(ck, a + "in_proj_b.weight"), wo = get(ck, a + "out_proj.weight");
      Vec conv = get(ck, a + "conv1d.weight"), alog = get(ck, a + "A_log"), dt = get(ck, a + "dt_bias");
      Vec nw = get(ck, a + "norm.weight");
      std::vector<Vec> qkv(T), act(T);
      for (size_t t = 0; t < T; ++t) qkv[t] = linear(wqkv, h[t], C);
      for (size_t t = 0; t < T; ++t) {
        act[t].assign(size_t(C), 0);
        for (int ch = 0; ch < C; ++ch) {
          double acc = 0;
          for (int i = 0; i < K; ++i) {
            long src = long(t) - (K - 1) + i;
            if (src >= 0) acc += conv[size_t(ch * K + i)] * qkv[size_t(src)][size_t(ch)];
          }
          act[t][size_t(ch)] = silu(acc);
        }
      }
      std::vector<Vec> state(size_t(nv), Vec(size_t(dk * dv), 0.0));
      for (size_t t = 0; t < T; ++t) {
        Vec z = linear(wz, h[t], nv * dv), av = linear(wa, h[t], nv), bv = linear(wb, h[t], nv);
        Vec core(size_t(nv * dv));
        for (int hv = 0; hv < nv; ++hv) {
          const int kh = hv / (nv / nk);
          Vec q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk));
          // x / sqrt(Σx² + 1e-6)
          auto l2 = [&](Vec& v, size_t begin) {
            double ss = 0;
            for (int i = 0; i < dk; ++i) ss += act[t][begin + size_t(i)] * act[t][begin + size_t(i)];
            for (int i = 0; i < dk; ++i) v[size_t(i)] = act[t][begin + size_t(i)] / std::sqrt(ss + 1e-6);
          };
          l2(q, size_t(kh * dk));
          l2(k, size_t(nk * dk + kh * dk));
          for (auto& e : q) e /= std::sqrt(double(dk));
          const double beta = sigmoid(bv[size_t(hv)]);
          const double sp = av[size_t(hv)] + dt[size_t(hv)];
          const double g = -std::exp(alog[size_t(hv)]) * (sp > 20 ? sp : std::log1p(std::exp(sp)));
          Vec& S = state[size_t(hv)];
          for (auto& e : S) e *= std::exp(g);
          const double* v = &act[t][size_t(2 * nk * dk + hv * dv)];
          for (int j = 0; j < dv; ++j) {
            double mem = 0;
            for (int i = 0; i < dk; ++i) mem += S[size_t(i * dv + j)] * k[size_t(i)];
            const double delta = (v[j] - mem) * beta;
            for (int i = 0; i < dk; ++i) S[size_t(i * dv + j)] += k[size_t(i)] * delta;
          }
          Vec o(size_t(dv), 0.0);
          for (int j = 0; j < dv; ++j)
            for (int i = 0; i < dk; ++i) o[size_t(j)] += S[size_t(i * dv + j)] * q[size_t(i)];
          Vec on = rms(o, 0, size_t(dv), eps);
          for (int j = 0; j < dv; ++j)
            core[size_t(hv * dv + j)] = nw[size_t(j)] * on[size_t(j)] * silu(z[size_t(hv * dv + j)]);
        }
        mixed[t] = linear(wo, core, int(H));
      }
    } else {
      const std::string a = p + "self_attn.";
      const int nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim, rot = s.rotary_dim;
      Vec wq = get(ck, a + "q_proj.weight"), wk = get(ck, a + "k_proj.weight"), wv = get(ck, a + "v_proj.weight");
      Vec wo = get(ck, a + "o_proj.weight"), qn = get(ck, a + "q_norm.weight"), kn = get(ck, a + "k_norm.weight");
      std::vector<Vec> q(T), gate(T), k(T), v(T);
      auto rotate = [&](Vec& head, size_t pos) {
        for (int i = 0; i < rot / 2; ++i) {
          const double inv = std::pow(c.rope.theta, -double(2 * i) / double(rot)), ang = double(pos) * inv;
          const double x1 = head[size_t(i)], x2 = head[size_t(i + rot / 2)];
          head[size_t(i)] = x1 * std::cos(ang) - x2 * std::sin(ang);
          head[size_t(i + rot / 2)] = x2 * std::cos(ang) + x1 * std::sin(ang);
        }
      };
      for (size_t t = 0; t < T; ++t) {
        Vec qg = linear(wq, h[t], 2 * nh * hd), kk = linear(wk, h[t], nkv * hd);
        v[t] = linear(wv, h[t], nkv * hd);
        for (int hh = 0; hh < nh; ++hh) {
          Vec head = rms(qg, size_t(hh * 2 * hd), size_t(hd), eps);
          for (int i = 0; i < hd; ++i) head[size_t(i)] *= 1 + qn[size_t(i)];
          rotate(head, t);
          q[t].insert(q[t].end(), head.begin(), head.end());
          gate[t].insert(gate[t].end(), qg.begin() + long(hh * 2 * hd + hd), qg.begin() + long(hh * 2 * hd + 2 * hd));
        }
        for (int hh = 0; hh < nkv; ++hh) {
          Vec head = rms(kk, size_t(hh * hd), size_t(hd), eps);
          for (int i = 0; i < hd; ++i) head[size_t(i)] *= 1 + kn[size_t(i)];
          rotate(head, t);
          k[t].insert(k[t].end(), head.begin(), head.end());
        }
      }
      for (size_t t = 0; t < T; ++t) {
        Vec out(size_t(nh * hd), 0.0);
        for (int hh = 0; hh < nh; ++hh) {
          const int g = hh / (nh / nkv);
          Vec sc(t + 1);
          double mx = -1e300, sum = 0;
          for (size_t j = 0; j <= t; ++j) {
            double d = 0;
            for (int i = 0; i < hd; ++i) d += q[t][size_t(hh * hd + i)] * k[j][size_t(g * hd + i)];
            sc[j] = d / std::sqrt(double(hd));
            mx = std::max(mx, sc[j]);
          }
          for (auto& e : sc) sum += (e = std::exp(e - mx));
          for (size_t j = 0; j <= t; ++j)
            for (int i = 0; i < hd; ++i) out[size_t(hh * hd + i)] += sc[j] / sum * v[j][size_t(g * hd + i)];
        }
        for (size_t i = 0; i < out.size(); ++i) out[i] *= sigmoid(gate[t][i]);
        mixed[t] = linear(wo, out, int(H));
      }
    }
    Vec wg = get(ck, p + "mlp.gate_proj.weight"), wu = get(ck, p + "mlp.up_proj.weight");
    Vec wd = get(ck, p + "mlp.down_proj.weight");
    for (size_t t = 0; t < T; ++t) {
      for (size_t i = 0; i < H; ++i) x[t][i] += mixed[t][i];
      Vec hn = norm_1p(x[t], post_norm);
      Vec g = linear(wg, hn, c.intermediate_size), u = linear(wu, hn, c.intermediate_size);
      for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
      Vec d = linear(wd, g, int(H));
      for (size_t i = 0; i < H; ++i) x[t][i] += d[i];
    }
  }
  Vec fn = get(ck, "model.norm.weight");
  Vec head = ck.has("lm_head.weight") ? get(ck, "lm_head.weight") : embed;
  std::vector<double> logits;
  for (size_t t = 0; t < T; ++t) {
    Vec l = linear(head, norm_1p(x[t], fn), int(V));
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace fs::test

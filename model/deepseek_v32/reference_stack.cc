#include "model/deepseek_v32/reference_stack.h"

#include <algorithm>
#include <cmath>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/ops.h"
#include "model/deepseek_v32/host_math.h"

namespace dsa::model::deepseek_v32 {
namespace {

using attention::DType;

std::vector<double> Linear(const std::vector<double>& x, int64_t tokens,
                           int64_t in, const std::vector<float>& w,
                           int64_t out) {
  std::vector<double> y(tokens * out, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i)
        acc += x[t * in + i] * double{w[o * in + i]};
      y[t * out + o] = acc;
    }
  }
  return y;
}

void RmsNorm(double* v, int64_t dim, const std::vector<float>& weight,
             double eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum_sq += v[i] * v[i];
  const double inv = 1.0 / std::sqrt(sum_sq / dim + eps);
  for (int64_t i = 0; i < dim; ++i) v[i] *= inv * weight[i];
}

// Every row of x [tokens, dim] normalised.
std::vector<double> RmsNormRows(std::vector<double> x, int64_t tokens,
                                int64_t dim, const std::vector<float>& weight,
                                double eps) {
  for (int64_t t = 0; t < tokens; ++t) RmsNorm(&x[t * dim], dim, weight, eps);
  return x;
}

// Rope at `position` with inverse frequencies `inv` (angles in float64),
// cos and sin times `scale`; interleaved pairs (2i, 2i+1) or NeoX pairs
// (i, i + rope/2).
void Rope(double* v, int64_t rope, int64_t position,
          const std::vector<double>& inv, double scale, bool neox) {
  for (int64_t i = 0; i < rope / 2; ++i) {
    const double angle = position * inv[i];
    const double c = std::cos(angle) * scale, s = std::sin(angle) * scale;
    const int64_t ia = neox ? i : 2 * i;
    const int64_t ib = neox ? i + rope / 2 : 2 * i + 1;
    const double a = v[ia], b = v[ib];
    v[ia] = a * c - b * s;
    v[ib] = b * c + a * s;
  }
}

double RoundBf16(double v) {
  return attention::Bf16ToFloat(attention::FloatToBf16(static_cast<float>(v)));
}

// What the latent cache hands back for kv_c (in tiles of 128 for fp8).
void RoundLatent(double* kv_c, int64_t kv_lora, DType dtype) {
  if (!attention::IsFp8(dtype)) {
    for (int64_t i = 0; i < kv_lora; ++i) kv_c[i] = RoundBf16(kv_c[i]);
    return;
  }
  const attention::Fp8Traits traits = attention::Fp8TraitsOf(dtype);
  for (int64_t tile = 0; tile < kv_lora;
       tile += attention::kLatentFp8TileSize) {
    float amax = 0.0f;
    for (int64_t i = tile; i < tile + attention::kLatentFp8TileSize; ++i) {
      amax = std::max(amax, std::fabs(static_cast<float>(kv_c[i])));
    }
    const float scale = attention::Ue8m0Scale(amax, traits.max);
    for (int64_t i = tile; i < tile + attention::kLatentFp8TileSize; ++i) {
      const uint8_t code =
          attention::FloatToFp8(static_cast<float>(kv_c[i]) / scale, traits);
      kv_c[i] = double{attention::Fp8ToFloat(code, traits)} * scale;
    }
  }
}

}  // namespace

ReferenceOutput ReferenceForward(const ModelConfig& config,
                                 const std::vector<LayerWeights>& weights,
                                 const std::vector<float>& x_in, int64_t S,
                                 DType latent_dtype,
                                 const std::vector<float>& mtp_embeddings) {
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden = c.hidden_size(), H = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t vdim = c.v_head_dim(), kv_lora = c.kv_lora_rank();
  const int64_t q_lora = c.q_lora_rank(), qk = nope + rope;
  const double scale = config.mla_softmax_scale();
  const double eps = c.rms_norm_eps();
  const std::vector<double> inv = RopeInverseFrequencies(c);
  const double cs_scale = RopeCosSinScale(c);
  const bool neox = c.mla_rope_style() == MLA_ROPE_NEOX;

  std::vector<double> h(x_in.begin(), x_in.end());
  ReferenceOutput result;
  for (int l = 0; l < config.num_layers(); ++l) {
    const LayerWeights& w = weights[l];
    if (config.is_mtp_layer(l)) {
      // [enorm(embedding, zero at position 0) | hnorm(h)] W_eh.
      std::vector<double> e(S * hidden, 0.0);
      const std::vector<float>& emb =
          mtp_embeddings.empty() ? x_in : mtp_embeddings;
      for (int64_t i = hidden; i < S * hidden; ++i) e[i] = emb[i];
      e = RmsNormRows(std::move(e), S, hidden, w.enorm, eps);
      std::vector<double> g = h;
      if (l == config.num_main_layers()) {
        g = RmsNormRows(std::move(g), S, hidden, w.final_norm, eps);
      }
      g = RmsNormRows(std::move(g), S, hidden, w.hnorm, eps);
      std::vector<double> cat(S * 2 * hidden);
      for (int64_t t = 0; t < S; ++t) {
        std::copy_n(&e[t * hidden], hidden, &cat[t * 2 * hidden]);
        std::copy_n(&g[t * hidden], hidden, &cat[t * 2 * hidden + hidden]);
      }
      h = Linear(cat, S, 2 * hidden, w.eh_proj, hidden);
    }
    const std::vector<double> x =
        RmsNormRows(h, S, hidden, w.input_layernorm, eps);
    std::vector<double> q_c = Linear(x, S, hidden, w.q_a_proj, q_lora);
    q_c = RmsNormRows(std::move(q_c), S, q_lora, w.q_a_layernorm, eps);
    std::vector<double> q = Linear(q_c, S, q_lora, w.q_b_proj, H * qk);
    std::vector<double> kv =
        Linear(x, S, hidden, w.kv_a_proj_with_mqa, kv_lora + rope);
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t hh = 0; hh < H; ++hh)
        Rope(&q[(t * H + hh) * qk + nope], rope, t, inv, cs_scale, neox);
      double* row = &kv[t * (kv_lora + rope)];
      RmsNorm(row, kv_lora, w.kv_a_layernorm, eps);
      Rope(row + kv_lora, rope, t, inv, cs_scale, neox);
      RoundLatent(row, kv_lora, latent_dtype);
      for (int64_t i = 0; i < rope; ++i)
        row[kv_lora + i] = RoundBf16(row[kv_lora + i]);
    }
    // Keys and values per head, decompressed from the (rounded) latent.
    std::vector<double> k(S * H * qk), v(S * H * vdim);
    for (int64_t j = 0; j < S; ++j) {
      const double* lat = &kv[j * (kv_lora + rope)];
      for (int64_t hd = 0; hd < H; ++hd) {
        for (int64_t n = 0; n < nope + vdim; ++n) {
          const float* wr = &w.kv_b_proj[(hd * (nope + vdim) + n) * kv_lora];
          double acc = 0.0;
          for (int64_t i = 0; i < kv_lora; ++i) acc += double{wr[i]} * lat[i];
          if (n < nope) {
            k[(j * H + hd) * qk + n] = acc;
          } else {
            v[(j * H + hd) * vdim + (n - nope)] = acc;
          }
        }
        for (int64_t i = 0; i < rope; ++i)
          k[(j * H + hd) * qk + nope + i] = lat[kv_lora + i];
      }
    }
    std::vector<double> attn(S * H * vdim, 0.0), p(S);
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t hd = 0; hd < H; ++hd) {
        double m = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0.0;
          for (int64_t d = 0; d < qk; ++d)
            s += q[(t * H + hd) * qk + d] * k[(j * H + hd) * qk + d];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t d = 0; d < vdim; ++d) {
            attn[(t * H + hd) * vdim + d] +=
                p[j] / sum * v[(j * H + hd) * vdim + d];
          }
        }
      }
    }
    std::vector<double> out = Linear(attn, S, H * vdim, w.o_proj, hidden);
    for (size_t i = 0; i < h.size(); ++i) h[i] += out[i];
    result.layer_hidden.push_back(h);
    if (l + 1 == config.num_main_layers()) result.hidden = h;
  }
  if (config.num_mtp_layers() > 0) result.mtp_hidden = h;
  return result;
}

}  // namespace dsa::model::deepseek_v32

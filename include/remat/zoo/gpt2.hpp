// The zoo's GPT-2: HuggingFace's layout at any depth, block by block or operator by operator
// (the accounting is in remat/zoo.hpp's comment).
#pragma once

#include <remat/zoo/network.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::zoo::detail {

// ---- GPT-2 --------------------------------------------------------------------------------

struct gpt2_config {
  int layers = 0;
  size_type hidden = 0;
  size_type heads = 0;
};

inline constexpr size_type gpt2_vocabulary = 50257;

inline void gpt2(const context& cx, size_type seq, const gpt2_config& g) {
  const size_type tokens = mul(cx.batch, seq);
  const size_type h = g.hidden;
  const size_type act = mul(tokens, h);  // elements of a b x s x h activation
  const double p = to_double(cx.p);
  const double table = to_double(mul(gpt2_vocabulary, h));

  // Embedding: token rows (read from the table) plus position rows, then dropout. Its backward
  // zeroes and accumulates into the token table's gradient.
  {
    stage_recorder st(cx.machine, cx.p, tokens, 8, false);
    const tensor e = st.gather(st.input(), act, to_double(mul(seq, h)) * p, 2 * table * p);
    cx.push("embedding", st, st.dropout(e));
  }
  // Pre-LN block: LN, Q/K/V projections, scores = QK^T, scale and causal mask, softmax,
  // dropout, times V, merge heads (a copy), output projection, dropout, residual; LN, fc (4h),
  // GELU, projection (h), dropout, residual.
  const size_type scores = mul({cx.batch, g.heads, seq, seq});
  const double proj_macs = to_double(act) * to_double(h);
  const double attn_macs = to_double(scores) * to_double(h / g.heads);
  const size_type hh = mul(h, h);
  for (int i = 0; i < g.layers; ++i) {
    stage_recorder st(cx.machine, cx.p, act, cx.p, true);
    const tensor x = st.input();
    const tensor ln1 = st.normalize(x);
    const tensor q = st.product({ln1}, act, proj_macs, add(hh, h));
    const tensor k = st.product({ln1}, act, proj_macs, add(hh, h));
    const tensor v = st.product({ln1}, act, proj_macs, add(hh, h));
    const tensor s = st.pointwise(st.product({q, k}, scores, attn_macs, 0));
    const tensor probs = st.dropout(st.softmax(s));
    const tensor merged = st.pointwise(st.product({probs, v}, act, attn_macs, 0));
    const tensor attn = st.dropout(st.product({merged}, act, proj_macs, add(hh, h)));
    const tensor r = st.sum(x, attn);
    const tensor fc =
        st.product({st.normalize(r)}, mul(act, 4), 4 * proj_macs, add(mul(hh, 4), mul(h, 4)));
    const tensor mlp =
        st.dropout(st.product({st.gelu(fc)}, act, 4 * proj_macs, add(mul(hh, 4), h)));
    cx.push("h." + std::to_string(i), st, st.sum(r, mlp));
  }
  // Final LN and the LM head (tied to the token table): logits b x s x V.
  {
    stage_recorder st(cx.machine, cx.p, act, cx.p, true);
    const tensor logits =
        st.product({st.normalize(st.input())}, mul(tokens, gpt2_vocabulary),
                   to_double(act) * to_double(gpt2_vocabulary), mul(gpt2_vocabulary, h));
    cx.push("lm_head", st, logits);
  }
  cross_entropy(cx, tokens, gpt2_vocabulary);
}

inline std::optional<gpt2_config> gpt2_config_of(std::string_view model) {
  if (model == "gpt2-small") return gpt2_config{12, 768, 12};
  if (model == "gpt2-medium") return gpt2_config{24, 1024, 16};
  if (model == "gpt2-large") return gpt2_config{36, 1280, 20};
  if (model == "gpt2-xl") return gpt2_config{48, 1600, 25};
  return std::nullopt;
}

}  // namespace remat::zoo::detail

// The zoo: chains of real networks, costed analytically (docs: ZOO.md), for benchmarks, examples
// and tests that need realistic chains without a GPU.
//
//   remat::zoo::network n = remat::zoo::build("resnet101", {.batch = 32});
//   remat::solve_result r = remat::solve(n.chain, 8'000'000'000);
//
// Models: resnet50 resnet101 resnet152 resnet1001 vgg16 vgg19 densenet121 gpt2-small gpt2-medium
// gpt2-large gpt2-xl (GPT-2 at any depth with `layers`). Stages: one per residual block, dense
// layer, transition, conv layer (VGG, with the pooling that follows it), fully connected layer
// (VGG) or transformer block, plus the stems and heads (GPT-2: the embedding first, the final
// LayerNorm and the LM head last); or, with `operators`, one per operator of those (a GPT-2
// block is 19), as a profiler sees them: long chains for coarsening (remat/coarsen.hpp). Times
// in milliseconds, sizes in bytes. Each stage's costs come from its layers, listed op by op (what
// each reads, allocates and saves for backward), by the rules of <remat/zoo/stage.hpp>.
//
// Layer details follow the reference implementations:
// * ResNet-50/101/152: torchvision ("v1.5": stride in the 3x3 conv, in-place ReLU), so an
//   identity block keeps 3x its output on tape (ZOO.md). 4.1 / 7.8 / 11.5 GMAC per 224x224 image.
// * ResNet-1001: the pre-activation CIFAR network (He et al. 2016): 3x3 stem to 16 channels,
//   3 groups of 111 bottlenecks of width 16/32/64 (outputs 64/128/256), BN-ReLU-avgpool-fc(10)
//   head. Default image 32x32.
// * VGG-16/19: torchvision's layers; ZOO.md's accounting for conv+ReLU (tape 2x the output: the
//   conv output and the ReLU output, as when ReLU is differentiated from its input).
// * DenseNet-121: torchvision's (growth 32, bottleneck 4x32, blocks 6/12/24/16, transitions
//   halving the channels); a dense layer's output is the concatenation of its input and its 32
//   new channels, so activations grow along each block.
// * GPT-2 (HuggingFace's layout, pre-LayerNorm, dropout on): per block the tape is
//   Korthikanti et al.'s (arXiv 2205.05198) 34sbh + 5as^2b bytes for 16-bit activations, or
//   in general (16p + 2)sbh + (2p + 1)as^2b with p bytes per element and 1-byte dropout masks;
//   forward FLOPs 24bsh^2 + 4bs^2h. The input is the int64 token ids. The loss is cross-entropy
//   over the 50257-word vocabulary, computed in fp32 as autocast does.
//
// Defaults: an NVIDIA A100 (SXM4, 80 GB): 19.5 TFLOP/s for fp32 (CUDA cores, TF32 off), 312
// TFLOP/s for fp16/bf16 (dense tensor cores), 2.0 TB/s of HBM bandwidth (2039 GB/s, rounded).
// Peak figures, never reached in practice, so the times are optimistic but consistent; pass
// measured figures for a closer fit. CNNs default to batch 32, 224x224 images (32x32 for
// ResNet-1001) and fp32; GPT-2 to batch 8, sequences of 1024 and bf16.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/zoo/stage.hpp>

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

namespace remat::zoo {

/// Bytes per element of activations and gradients.
enum class dtype : std::uint8_t { fp32, fp16, bf16 };

/// `fp32`, `fp16`, `bf16`.
constexpr std::string_view name(dtype d) noexcept {
  switch (d) {
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
    case dtype::bf16: return "bf16";
  }
  return "?";
}

/// The dtype called `n`, if there is one.
constexpr std::optional<dtype> dtype_from_name(std::string_view n) noexcept {
  for (const dtype d : {dtype::fp32, dtype::fp16, dtype::bf16})
    if (name(d) == n) return d;
  return std::nullopt;
}

constexpr size_type bytes_per_element(dtype d) noexcept {
  return d == dtype::fp32 ? 4 : 2;
}

/// The default machine, an NVIDIA A100 SXM4 80 GB (datasheet peaks).
inline constexpr double a100_fp32_flops = 19.5e12;  ///< FP32 on CUDA cores (TF32 off)
inline constexpr double a100_fp16_flops = 312e12;   ///< FP16/BF16, dense tensor cores
inline constexpr double a100_bandwidth = 2.0e12;    ///< HBM2e bytes/s

/// The default peak for `d`: `a100_fp32_flops` or `a100_fp16_flops`.
constexpr double default_peak_flops(dtype d) noexcept {
  return d == dtype::fp32 ? a100_fp32_flops : a100_fp16_flops;
}

/// Every model `build` knows, in the order tools list them.
inline constexpr std::array<std::string_view, 11> model_names = {
    "resnet50",    "resnet101",  "resnet152",   "resnet1001", "vgg16",  "vgg19",
    "densenet121", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"};

/// What to build; absent values take the model's defaults (see the file comment).
struct options {
  std::optional<size_type> batch;            ///< >= 1
  std::optional<size_type> image_size;       ///< CNNs only: square images, >= 32 pixels
  std::optional<size_type> sequence_length;  ///< GPT-2 only: tokens, >= 1
  std::optional<zoo::dtype> dtype;
  std::optional<double> peak_flops;  ///< FLOP/s, > 0
  std::optional<double> bandwidth;   ///< bytes/s, > 0
  std::optional<int> layers;  ///< GPT-2 only: transformer blocks, 1 .. 100000 (model's own count)
  bool operators = false;     ///< one stage per operator (see stage_recorder::finish_operators)
};

/// The options a network was built with, defaults filled in.
struct settings {
  std::string model;
  size_type batch = 0;
  size_type image_size = 0;       ///< 0 for GPT-2
  size_type sequence_length = 0;  ///< 0 for CNNs
  zoo::dtype dtype = zoo::dtype::fp32;
  double peak_flops = 0;
  double bandwidth = 0;
  int layers = 0;  ///< GPT-2's transformer blocks; 0 for CNNs
  bool operators = false;
};

/// A network as a chain, with what the chain format does not carry.
struct network {
  std::string name;         ///< e.g. `resnet101-b32-224-fp32`, `gpt2-medium-b4-s1024-bf16`
  std::string description;  ///< the model and its settings, in words
  zoo::settings used;
  remat::chain chain;
  std::vector<std::string> stage_names;  ///< one per stage: `stem`, `layer3.5`, `h.11`, ...
  std::vector<double> stage_flops;       ///< forward FLOPs per stage (2 per multiply-add)
  double total_flops = 0;                ///< their sum
};

namespace detail {

// `value` with 4 significant digits.
inline std::string four_digits(double value) {
  std::array<char, 64> text{};
  std::snprintf(text.data(), text.size(), "%.4g", value);
  return text.data();
}

// Appends stages to a network.
struct context {
  roofline machine;
  size_type batch = 0;
  size_type p = 0;
  network* net = nullptr;

  bool operators = false;  // one stage per op instead of one per layer or block

  void push(std::string stage_name, const recorded_stage& s) const {
    net->chain.stages.push_back(s.costs);
    net->stage_names.push_back(std::move(stage_name));
    net->stage_flops.push_back(s.flops);
    net->total_flops += s.flops;
  }
  // The stage recorded by `rec` (a stage_recorder or a cnn_stage) ending at `out`, or its ops,
  // named `stage_name.j.op`.
  template <class Recorder, class Out>
  void push(std::string stage_name, const Recorder& rec, const Out& out) const {
    if (!operators) {
      push(std::move(stage_name), rec.finish(out));
      return;
    }
    std::size_t j = 0;
    for (const auto& [op_name, s] : rec.finish_operators(out))
      push(stage_name + "." + std::to_string(j++) + "." + op_name, s);
  }
};

// Cross-entropy over `rows` x `classes` logits, forward and backward in one op (the model's
// loss). It runs in fp32 (autocast does so for 16-bit logits): it reads the logits, writes and
// reads back the log-softmax and its gradient, and writes the logits' gradient; it holds the
// log-softmax and its gradient, 4 bytes each, beside the logits and their gradient.
inline void cross_entropy(const context& cx, size_type rows, size_type classes) {
  const size_type e = mul(rows, classes);
  cx.net->chain.loss_time = cx.machine.ms(0, to_double(e) * (2 * to_double(cx.p) + 16));
  cx.net->chain.loss_overhead = mul(e, 8);
}

// ---- CNNs ---------------------------------------------------------------------------------

struct fmap {
  tensor t;
  size_type c = 0, h = 0, w = 0;
};

// Output extent of a window `kernel` wide, moved by `stride`, over `extent` padded by `pad`.
inline size_type out_extent(size_type extent, size_type kernel, size_type stride, size_type pad) {
  if (extent + 2 * pad < kernel) throw_zoo_error("the image is too small for this network");
  return (extent + 2 * pad - kernel) / stride + 1;
}

// One stage of a CNN, with shapes: a stage_recorder over batch x channels x height x width.
class cnn_stage {
 public:
  cnn_stage(const context& cx, size_type c, size_type h, size_type w)
      : rec_(cx.machine, cx.p, mul({cx.batch, c, h, w}), cx.p, true),
        batch_(cx.batch),
        in_{rec_.input(), c, h, w} {}

  [[nodiscard]] fmap input() const { return in_; }

  fmap conv(const fmap& x, size_type out_channels, size_type kernel, size_type stride,
            size_type pad) {
    const size_type h = out_extent(x.h, kernel, stride, pad);
    const size_type w = out_extent(x.w, kernel, stride, pad);
    const size_type out = mul({batch_, out_channels, h, w});
    const size_type weights = mul({out_channels, x.c, kernel, kernel});
    const double macs = to_double(out) * to_double(mul({x.c, kernel, kernel}));
    return {rec_.product({x.t}, out, macs, weights), out_channels, h, w};
  }
  // A fully connected layer over the flattened features of `x` (with a bias).
  fmap linear(const fmap& x, size_type out_features) {
    const size_type in_features = mul({x.c, x.h, x.w});
    const size_type out = mul(batch_, out_features);
    const double macs = to_double(out) * to_double(in_features);
    const size_type weights = add(mul(in_features, out_features), out_features);
    return {rec_.product({x.t}, out, macs, weights), out_features, 1, 1};
  }
  fmap batch_norm(const fmap& x) { return like(x, rec_.normalize(x.t)); }
  void relu_in_place(const fmap& x) { rec_.relu_in_place(x.t); }
  fmap relu(const fmap& x) { return like(x, rec_.relu(x.t)); }
  fmap dropout(const fmap& x) { return like(x, rec_.dropout(x.t)); }
  fmap sum(const fmap& a, const fmap& b) { return like(a, rec_.sum(a.t, b.t)); }
  void add_in_place(const fmap& into, const fmap& other) { rec_.add_in_place(into.t, other.t); }
  fmap concat(const fmap& a, const fmap& b) {
    return {rec_.concat(a.t, b.t), add(a.c, b.c), a.h, a.w};
  }
  fmap max_pool(const fmap& x, size_type kernel, size_type stride, size_type pad) {
    const size_type h = out_extent(x.h, kernel, stride, pad);
    const size_type w = out_extent(x.w, kernel, stride, pad);
    return {rec_.max_pool(x.t, mul({batch_, x.c, h, w})), x.c, h, w};
  }
  fmap average_pool(const fmap& x, size_type kernel, size_type stride) {
    const size_type h = out_extent(x.h, kernel, stride, 0);
    const size_type w = out_extent(x.w, kernel, stride, 0);
    return {rec_.average_pool(x.t, mul({batch_, x.c, h, w})), x.c, h, w};
  }
  // Adaptive average pooling to `size` x `size`.
  fmap adaptive_average_pool(const fmap& x, size_type size) {
    return {rec_.average_pool(x.t, mul({batch_, x.c, size, size})), x.c, size, size};
  }

  [[nodiscard]] recorded_stage finish(const fmap& out) const { return rec_.finish(out.t); }
  [[nodiscard]] auto finish_operators(const fmap& out) const {
    return rec_.finish_operators(out.t);
  }

 private:
  static fmap like(const fmap& x, tensor t) { return {t, x.c, x.h, x.w}; }

  stage_recorder rec_;
  size_type batch_;
  fmap in_;
};

inline fmap stage_output_shape(const fmap& x) {
  return {tensor{}, x.c, x.h, x.w};
}

// Classifier head: global average pooling, then the fully connected layer.
inline void pooled_classifier(const context& cx, const fmap& in, size_type classes,
                              bool batch_norm_first) {
  cnn_stage st(cx, in.c, in.h, in.w);
  fmap x = st.input();
  if (batch_norm_first) {  // pre-activation networks end with their last BN-ReLU
    x = st.batch_norm(x);
    st.relu_in_place(x);
  }
  x = st.adaptive_average_pool(x, 1);
  cx.push("head", st, st.linear(x, classes));
  cross_entropy(cx, cx.batch, classes);
}

// torchvision's bottleneck: 1x1 (w), 3x3 (w, stride), 1x1 (4w), each with BN; the shortcut is a
// strided 1x1 conv + BN when the shape changes; add, then ReLU, in place.
inline fmap resnet_bottleneck(const context& cx, const fmap& in, size_type width, size_type stride,
                              std::string stage_name) {
  cnn_stage st(cx, in.c, in.h, in.w);
  const fmap x = st.input();
  fmap y = st.batch_norm(st.conv(x, width, 1, 1, 0));
  st.relu_in_place(y);
  y = st.batch_norm(st.conv(y, width, 3, stride, 1));
  st.relu_in_place(y);
  const fmap out = st.batch_norm(st.conv(y, 4 * width, 1, 1, 0));
  if (stride != 1 || in.c != 4 * width)
    st.add_in_place(out, st.batch_norm(st.conv(x, 4 * width, 1, stride, 0)));
  else
    st.add_in_place(out, x);
  st.relu_in_place(out);
  cx.push(std::move(stage_name), st, out);
  return stage_output_shape(out);
}

inline void resnet(const context& cx, size_type image, const std::array<int, 4>& blocks) {
  cnn_stage st(cx, 3, image, image);
  fmap x = st.batch_norm(st.conv(st.input(), 64, 7, 2, 3));
  st.relu_in_place(x);
  x = st.max_pool(x, 3, 2, 1);
  cx.push("stem", st, x);
  x = stage_output_shape(x);
  for (std::size_t g = 0; g < blocks.size(); ++g) {
    const size_type width = size_type{64} << g;
    for (int i = 0; i < blocks[g]; ++i) {
      const size_type stride = g > 0 && i == 0 ? 2 : 1;
      x = resnet_bottleneck(cx, x, width, stride,
                            "layer" + std::to_string(g + 1) + "." + std::to_string(i));
    }
  }
  pooled_classifier(cx, x, 1000, false);
}

// Pre-activation bottleneck (He et al., "Identity mappings in deep residual networks"):
// BN-ReLU-1x1 (w), BN-ReLU-3x3 (w, stride), BN-ReLU-1x1 (4w), plus the shortcut: the input, or a
// strided 1x1 conv of the pre-activated input where the shape changes.
inline fmap preact_bottleneck(const context& cx, const fmap& in, size_type width, size_type stride,
                              std::string stage_name) {
  cnn_stage st(cx, in.c, in.h, in.w);
  const fmap x = st.input();
  const fmap pre = st.batch_norm(x);
  st.relu_in_place(pre);
  fmap y = st.batch_norm(st.conv(pre, width, 1, 1, 0));
  st.relu_in_place(y);
  y = st.batch_norm(st.conv(y, width, 3, stride, 1));
  st.relu_in_place(y);
  y = st.conv(y, 4 * width, 1, 1, 0);
  const bool project = stride != 1 || in.c != 4 * width;
  const fmap out = st.sum(y, project ? st.conv(pre, 4 * width, 1, stride, 0) : x);
  cx.push(std::move(stage_name), st, out);
  return stage_output_shape(out);
}

inline void resnet1001(const context& cx, size_type image) {
  cnn_stage st(cx, 3, image, image);
  const fmap stem = st.conv(st.input(), 16, 3, 1, 1);
  cx.push("stem", st, stem);
  fmap x = stage_output_shape(stem);
  for (std::size_t g = 0; g < 3; ++g) {
    const size_type width = size_type{16} << g;
    for (int i = 0; i < 111; ++i) {
      const size_type stride = g > 0 && i == 0 ? 2 : 1;
      x = preact_bottleneck(cx, x, width, stride,
                            "group" + std::to_string(g + 1) + "." + std::to_string(i));
    }
  }
  pooled_classifier(cx, x, 10, true);
}

// VGG: each conv+ReLU is a stage, with the max pooling that follows it; then fc6 (after
// adaptive pooling to 7x7), fc7 with ReLU and dropout, and fc8.
inline void vgg(const context& cx, size_type image, const std::vector<int>& config) {
  fmap x{tensor{}, 3, image, image};
  int block = 1;
  int layer = 1;
  for (std::size_t i = 0; i < config.size(); ++i) {
    cnn_stage st(cx, x.c, x.h, x.w);
    fmap y = st.relu(st.conv(st.input(), config[i], 3, 1, 1));
    std::string stage_name = "conv" + std::to_string(block) + "_" + std::to_string(layer++);
    if (i + 1 < config.size() && config[i + 1] == 0) {  // 0: max pooling
      y = st.max_pool(y, 2, 2, 0);
      ++block;
      layer = 1;
      ++i;
    }
    cx.push(std::move(stage_name), st, y);
    x = stage_output_shape(y);
  }
  for (int fc = 6; fc <= 8; ++fc) {
    cnn_stage st(cx, x.c, x.h, x.w);
    fmap y = st.input();
    if (fc == 6) y = st.adaptive_average_pool(y, 7);
    y = st.linear(y, fc == 8 ? 1000 : 4096);
    if (fc != 8) y = st.dropout(st.relu(y));
    cx.push("fc" + std::to_string(fc), st, y);
    x = stage_output_shape(y);
  }
  cross_entropy(cx, cx.batch, 1000);
}

inline void densenet121(const context& cx, size_type image) {
  constexpr size_type growth = 32;
  constexpr size_type bottleneck = 4 * growth;
  cnn_stage stem(cx, 3, image, image);
  fmap x = stem.batch_norm(stem.conv(stem.input(), 64, 7, 2, 3));
  stem.relu_in_place(x);
  x = stem.max_pool(x, 3, 2, 1);
  cx.push("stem", stem, x);
  x = stage_output_shape(x);
  const std::array<int, 4> layers = {6, 12, 24, 16};
  for (std::size_t b = 0; b < layers.size(); ++b) {
    const std::string block = "denseblock" + std::to_string(b + 1);
    for (int i = 0; i < layers[b]; ++i) {
      cnn_stage st(cx, x.c, x.h, x.w);
      const fmap in = st.input();
      fmap y = st.batch_norm(in);
      st.relu_in_place(y);
      y = st.batch_norm(st.conv(y, bottleneck, 1, 1, 0));
      st.relu_in_place(y);
      const fmap out = st.concat(in, st.conv(y, growth, 3, 1, 1));
      cx.push(block + ".denselayer" + std::to_string(i + 1), st, out);
      x = stage_output_shape(out);
    }
    if (b + 1 < layers.size()) {
      cnn_stage st(cx, x.c, x.h, x.w);
      fmap y = st.batch_norm(st.input());
      st.relu_in_place(y);
      y = st.average_pool(st.conv(y, x.c / 2, 1, 1, 0), 2, 2);
      cx.push("transition" + std::to_string(b + 1), st, y);
      x = stage_output_shape(y);
    }
  }
  pooled_classifier(cx, x, 1000, true);
}

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

inline std::string known_models() {
  std::string list;
  for (const std::string_view m : model_names) list += (list.empty() ? "" : ", ") + std::string(m);
  return list;
}

struct build_fn {
  /// Builds `model` with `opts`; throws `zoo_error` for an unknown model or a bad option.
  network operator()(std::string_view model, const options& opts = {}) const {
    bool known = false;
    for (const std::string_view m : model_names) known = known || m == model;
    if (!known)
      throw_zoo_error("unknown model \"" + std::string(model) + "\" (known: " + known_models() +
                      ")");
    const std::optional<gpt2_config> transformer = gpt2_config_of(model);
    const std::string m(model);

    settings s;
    s.model = m;
    s.batch = opts.batch.value_or(transformer ? 8 : 32);
    if (s.batch < 1) throw_zoo_error("batch must be >= 1 (got " + std::to_string(s.batch) + ")");
    if (transformer) {
      if (opts.image_size)
        throw_zoo_error(m + " is a transformer: give a sequence length, not an image size");
      s.sequence_length = opts.sequence_length.value_or(1024);
      if (s.sequence_length < 1)
        throw_zoo_error("sequence length must be >= 1 (got " + std::to_string(s.sequence_length) +
                        ")");
    } else {
      if (opts.sequence_length)
        throw_zoo_error(m + " is a CNN: give an image size, not a sequence length");
      s.image_size = opts.image_size.value_or(model == "resnet1001" ? 32 : 224);
      if (s.image_size < 32)
        throw_zoo_error("image size must be >= 32 (got " + std::to_string(s.image_size) + ")");
    }
    s.dtype = opts.dtype.value_or(transformer ? dtype::bf16 : dtype::fp32);
    s.peak_flops = opts.peak_flops.value_or(default_peak_flops(s.dtype));
    s.bandwidth = opts.bandwidth.value_or(a100_bandwidth);
    s.operators = opts.operators;
    if (opts.layers && !transformer)
      throw_zoo_error(m + " is a CNN: its depth is fixed (--layers is for GPT-2)");
    if (transformer) {
      s.layers = opts.layers.value_or(transformer->layers);
      if (s.layers < 1 || s.layers > 100000)
        throw_zoo_error("layers must be between 1 and 100000 (got " + std::to_string(s.layers) +
                        ")");
    }
    // Written so that NaN fails too.
    if (!(s.peak_flops > 0 && std::isfinite(s.peak_flops)))
      throw_zoo_error("peak FLOP/s must be a finite number > 0");
    if (!(s.bandwidth > 0 && std::isfinite(s.bandwidth)))
      throw_zoo_error("bandwidth must be a finite number > 0");

    network net;
    const context cx{
        {s.peak_flops, s.bandwidth}, s.batch, bytes_per_element(s.dtype), &net, s.operators};
    const std::string ops_name = s.operators ? "-ops" : "";
    const std::string ops_words = s.operators ? ", one stage per operator" : "";
    const std::string batch = "-b" + std::to_string(s.batch);
    const std::string type = std::string(name(s.dtype));
    const std::string machine = "; roofline at " + four_digits(s.peak_flops / 1e12) +
                                " TFLOP/s and " + four_digits(s.bandwidth / 1e9) + " GB/s";
    if (transformer) {
      net.chain.input_size = mul(mul(s.batch, s.sequence_length), 8);
      gpt2_config g = *transformer;
      const bool own_depth = s.layers == g.layers;
      g.layers = s.layers;
      gpt2(cx, s.sequence_length, g);
      net.name = m + (own_depth ? "" : "-L" + std::to_string(s.layers)) + batch + "-s" +
                 std::to_string(s.sequence_length) + "-" + type + ops_name;
      net.description = m + (own_depth ? "" : " at " + std::to_string(s.layers) + " layers") +
                        ": batch " + std::to_string(s.batch) + ", sequences of " +
                        std::to_string(s.sequence_length) + " tokens, " + type + ops_words +
                        machine;
    } else {
      const size_type image = s.image_size;
      net.chain.input_size = mul({s.batch, 3, image, image, cx.p});
      if (model == "resnet50") resnet(cx, image, {3, 4, 6, 3});
      if (model == "resnet101") resnet(cx, image, {3, 4, 23, 3});
      if (model == "resnet152") resnet(cx, image, {3, 8, 36, 3});
      if (model == "resnet1001") resnet1001(cx, image);
      if (model == "vgg16")
        vgg(cx, image,
            {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0});
      if (model == "vgg19")
        vgg(cx, image, {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                        512, 512, 512, 512, 0,   512, 512, 512, 512, 0});
      if (model == "densenet121") densenet121(cx, image);
      net.name = m + batch + "-" + std::to_string(image) + "-" + type + ops_name;
      net.description = m + ": batch " + std::to_string(s.batch) + ", " + std::to_string(image) +
                        "x" + std::to_string(image) + " images, " + type + ops_words + machine;
    }
    net.used = std::move(s);
    validate(net.chain);
    return net;
  }
};

}  // namespace detail

/// Builds a zoo network: `remat::zoo::build("gpt2-medium", {.batch = 4})`. Throws `zoo_error`
/// for an unknown model or an option out of range (and `remat::chain_error` never: every chain
/// it returns passes `remat::validate`).
inline constexpr detail::build_fn build{};

}  // namespace remat::zoo

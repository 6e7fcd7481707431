// The zoo: chains of real networks, costed analytically (remat-zoo: docs/cli.md), for benchmarks,
// examples and tests that need realistic chains without a GPU.
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
//   identity block keeps 3x its output on tape (remat/zoo/stage.hpp). 4.1 / 7.8 / 11.5 GMAC per
//   224x224 image.
// * ResNet-1001: the pre-activation CIFAR network (He et al. 2016): 3x3 stem to 16 channels,
//   3 groups of 111 bottlenecks of width 16/32/64 (outputs 64/128/256), BN-ReLU-avgpool-fc(10)
//   head. Default image 32x32.
// * VGG-16/19: torchvision's layers; the zoo's accounting for conv+ReLU (tape 2x the output: the
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
#include <remat/zoo/cnn.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/network.hpp>
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

namespace detail {

inline std::string known_models() {
  std::string list;
  for (const std::string_view m : model_names) list += (list.empty() ? "" : ", ") + std::string(m);
  return list;
}

// The settings `model` is built with: `opts` checked, the model's defaults filled in.
inline settings settings_of(std::string_view model, const options& opts) {
  bool known = false;
  for (const std::string_view m : model_names) known = known || m == model;
  if (!known)
    throw_zoo_error("unknown model \"" + std::string(model) + "\" (known: " + known_models() + ")");
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
      throw_zoo_error("layers must be between 1 and 100000 (got " + std::to_string(s.layers) + ")");
  }
  // Written so that NaN fails too.
  if (!(s.peak_flops > 0 && std::isfinite(s.peak_flops)))
    throw_zoo_error("peak FLOP/s must be a finite number > 0");
  if (!(s.bandwidth > 0 && std::isfinite(s.bandwidth)))
    throw_zoo_error("bandwidth must be a finite number > 0");
  return s;
}

struct build_fn {
  /// Builds `model` with `opts`; throws `zoo_error` for an unknown model or a bad option.
  network operator()(std::string_view model, const options& opts = {}) const {
    settings s = settings_of(model, opts);
    const std::optional<gpt2_config> transformer = gpt2_config_of(model);
    const std::string& m = s.model;
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

// The zoo's vocabulary: data types, machines, the options a network is built with, the network
// it gives, and the context the builders append stages with (remat/zoo.hpp builds them).
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

}  // namespace detail

}  // namespace remat::zoo

// Op-level graphs of the zoo's networks (docs/graphs.md): ResNet-50/101/152, DenseNet-121 and
// GPT-2 as remat::graph, and a U-Net, whose long skips leave few cut points. Each op is costed by
// the zoo's roofline (time = max(FLOPs / peak, bytes moved / bandwidth), in ms) with what its
// PyTorch backward saves: convolutions and linears their input, batch and layer norms their input
// (and a few statistics as internal bytes), ReLU its output (in place), GELU its input, dropout
// its mask (internal), attention its queries, keys, values and probabilities.
#pragma once

#include <remat/graph.hpp>
#include <remat/zoo.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace remat::zoo {

/// A network of the zoo as an op-level graph.
struct graph_network {
  std::string name;
  remat::graph graph;
};

namespace detail::graphs {

// Builds a graph op by op, costing each by the roofline of `s`.
class builder {
 public:
  builder(const settings& s, size_type bytes_per_element)
      : s_(s), dt_(bytes_per_element) {}

  remat::graph g;

  [[nodiscard]] size_type bytes(size_type elements) const { return elements * dt_; }
  [[nodiscard]] double ms(double flops, double moved) const {
    return std::max(flops / s_.peak_flops, moved / s_.bandwidth) * 1e3;
  }
  // An op reading `in` (activations) and `weights` (globals), making `out_bytes`; its backward
  // costs twice its forward FLOPs. `saves_input`, `saves_output`, `internal` as graph_node.
  std::size_t op(const std::string& name, std::vector<std::size_t> in, size_type out_bytes,
                 double flops, bool saves_input, bool saves_output = false,
                 size_type internal = 0, size_type transient = 0) {
    double moved = static_cast<double>(out_bytes);
    for (const std::size_t v : in) moved += static_cast<double>(g.values[v].size);
    node_costs c;
    c.forward_time = ms(flops, moved);
    c.backward_time = ms(2 * flops, 2 * moved);
    c.forward_transient = transient;
    c.backward_transient = transient;
    if (saves_input)
      for (const std::size_t v : in) c.saved.push_back(v);
    c.saves_output = saves_output;
    c.saved_internal = internal;
    return g.apply(name, std::move(in), out_bytes, c);
  }
  std::size_t relu(const std::string& name, std::size_t x) {
    const double moved = 2 * static_cast<double>(g.values[x].size);
    return g.apply_in_place(name, x, {},
                            {.forward_time = ms(0, moved), .backward_time = ms(0, moved),
                             .saves_output = true});
  }
  std::size_t weight(const std::string& name, size_type elements) {
    return g.global(name, bytes(elements));
  }

 private:
  settings s_;
  size_type dt_;
};

// Convolution + batch norm (+ ReLU in place) on a B x C x H x H tensor.
struct cnn {
  builder& b;
  size_type batch;
  std::size_t conv(const std::string& name, std::size_t x, size_type cin, size_type cout,
                   size_type k, size_type h_out) {
    const std::size_t w = b.weight(name + ".w", cout * cin * k * k);
    const size_type out = batch * cout * h_out * h_out;
    return b.op(name, {x, w}, b.bytes(out), 2.0 * static_cast<double>(out * cin * k * k), true);
  }
  std::size_t bn(const std::string& name, std::size_t x, size_type c) {
    const std::size_t w = b.weight(name + ".w", 2 * c);
    return b.op(name, {x, w}, b.g.values[x].size, 8.0 * static_cast<double>(b.g.values[x].size),
                true, false, b.bytes(2 * c));
  }
  std::size_t conv_bn(const std::string& name, std::size_t x, size_type cin, size_type cout,
                      size_type k, size_type h_out, bool relu) {
    const std::size_t y = bn(name + ".bn", conv(name + ".conv", x, cin, cout, k, h_out), cout);
    return relu ? b.relu(name + ".relu", y) : y;
  }
  // The graph's input image (side `h`) through the ImageNet stem: a 7x7 convolution of stride 2
  // with batch norm and ReLU, then a max pool of stride 2; `h` becomes the feature map's side.
  std::size_t image_stem(size_type& h) {
    std::size_t x = b.g.input("image", b.bytes(batch * 3 * h * h));
    h /= 2;
    x = conv_bn("stem", x, 3, 64, 7, h, true);
    h /= 2;
    return b.op("maxpool", {x}, b.bytes(batch * 64 * h * h), 0, true, true);
  }
};

inline graph_network resnet(const settings& s, const std::vector<int>& counts) {
  builder b(s, zoo::bytes_per_element(s.dtype));
  cnn c{b, s.batch};
  size_type h = s.image_size;
  std::size_t x = c.image_stem(h);
  size_type cin = 64;
  for (std::size_t stage = 0; stage < counts.size(); ++stage) {
    const size_type width = size_type{64} << stage;
    for (int i = 0; i < counts[stage]; ++i) {
      const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      const bool down = i == 0 && stage > 0;
      const size_type h_out = down ? h / 2 : h;
      std::size_t y = c.conv_bn(n + ".a", x, cin, width, 1, h, true);
      y = c.conv_bn(n + ".b", y, width, width, 3, h_out, true);
      y = c.conv_bn(n + ".c", y, width, 4 * width, 1, h_out, false);
      const std::size_t skip =
          i == 0 ? c.conv_bn(n + ".down", x, cin, 4 * width, 1, h_out, false) : x;
      y = b.op(n + ".add", {y, skip}, b.g.values[y].size, 0, false);
      x = b.relu(n + ".relu", y);
      cin = 4 * width;
      h = h_out;
    }
  }
  x = b.op("avgpool", {x}, b.bytes(s.batch * cin), 0, false);
  const std::size_t fc = b.weight("fc.w", cin * 1000);
  b.op("fc", {x, fc}, b.bytes(s.batch * 1000), 2.0 * static_cast<double>(s.batch * cin * 1000),
       true);
  return {s.model, std::move(b.g)};
}

inline graph_network densenet121(const settings& s) {
  builder b(s, zoo::bytes_per_element(s.dtype));
  cnn c{b, s.batch};
  size_type h = s.image_size;
  std::size_t x = c.image_stem(h);
  size_type channels = 64;
  const int layers[] = {6, 12, 24, 16};
  for (int block = 0; block < 4; ++block) {
    std::vector<std::size_t> features{x};
    for (int l = 0; l < layers[block]; ++l) {
      const std::string n = "dense" + std::to_string(block + 1) + "." + std::to_string(l);
      const std::size_t cat =
          features.size() == 1
              ? features.front()
              : b.op(n + ".cat", features, b.bytes(s.batch * channels * h * h), 0, false);
      std::size_t y = b.relu(n + ".relu1", c.bn(n + ".bn1", cat, channels));
      y = c.conv_bn(n + ".conv1", y, channels, 128, 1, h, true);
      y = c.conv(n + ".conv2", y, 128, 32, 3, h);
      features.push_back(y);
      channels += 32;
    }
    x = b.op("dense" + std::to_string(block + 1) + ".cat", features,
             b.bytes(s.batch * channels * h * h), 0, false);
    if (block == 3) break;
    const std::string n = "transition" + std::to_string(block + 1);
    x = b.relu(n + ".relu", c.bn(n + ".bn", x, channels));
    x = c.conv(n + ".conv", x, channels, channels / 2, 1, h);
    channels /= 2;
    h /= 2;
    x = b.op(n + ".pool", {x}, b.bytes(s.batch * channels * h * h), 0, false);
  }
  x = b.relu("final.relu", c.bn("final.bn", x, channels));
  x = b.op("avgpool", {x}, b.bytes(s.batch * channels), 0, false);
  const std::size_t fc = b.weight("fc.w", channels * 1000);
  b.op("fc", {x, fc}, b.bytes(s.batch * 1000),
       2.0 * static_cast<double>(s.batch * channels * 1000), true);
  return {s.model, std::move(b.g)};
}

// A U-Net (Ronneberger et al.): 4 levels down and up, 64 channels at the top, two 3x3
// convolutions per level; each level's output is read again by its decoder level, so every skip
// spans the whole middle of the network.
inline graph_network unet(const settings& s) {
  builder b(s, zoo::bytes_per_element(s.dtype));
  cnn c{b, s.batch};
  size_type h = s.image_size;
  std::size_t x = b.g.input("image", b.bytes(s.batch * 3 * h * h));
  size_type cin = 3;
  std::vector<std::size_t> skips;
  std::vector<size_type> skip_channels;
  for (int level = 0; level < 5; ++level) {
    const size_type width = size_type{64} << level;
    const std::string n = "down" + std::to_string(level);
    x = c.conv_bn(n + ".a", x, cin, width, 3, h, true);
    x = c.conv_bn(n + ".b", x, width, width, 3, h, true);
    cin = width;
    if (level == 4) break;
    skips.push_back(x);
    skip_channels.push_back(width);
    h /= 2;
    x = b.op(n + ".pool", {x}, b.bytes(s.batch * width * h * h), 0, true, true);
  }
  for (int level = 3; level >= 0; --level) {
    const auto l = static_cast<std::size_t>(level);
    const size_type width = skip_channels[l];
    const std::string n = "up" + std::to_string(level);
    h *= 2;
    x = c.conv(n + ".upconv", x, cin, width, 2, h);
    x = b.op(n + ".cat", {x, skips[l]}, b.bytes(s.batch * 2 * width * h * h), 0, false);
    x = c.conv_bn(n + ".a", x, 2 * width, width, 3, h, true);
    x = c.conv_bn(n + ".b", x, width, width, 3, h, true);
    cin = width;
  }
  c.conv("head", x, cin, 2, 1, h);
  return {"unet", std::move(b.g)};
}

inline graph_network gpt2(const settings& s, size_type hidden, size_type heads) {
  builder b(s, zoo::bytes_per_element(s.dtype));
  const size_type tokens = s.batch * s.sequence_length;
  const size_type act = b.bytes(tokens * hidden);
  const std::size_t ids = b.g.input("tokens", tokens * 8);
  const size_type vocab = 50257;
  const std::size_t wte = b.weight("wte", vocab * hidden);
  const std::size_t wpe = b.weight("wpe", s.sequence_length * hidden);
  std::size_t x = b.op("embed", {ids, wte, wpe}, act, 0, false);
  auto linear = [&](const std::string& n, std::size_t in, size_type out_features,
                    size_type in_features) {
    const std::size_t w = b.weight(n + ".w", in_features * out_features);
    return b.op(n, {in, w}, b.bytes(tokens * out_features),
                2.0 * static_cast<double>(tokens * in_features * out_features), true);
  };
  auto layer_norm = [&](const std::string& n, std::size_t in) {
    const std::size_t w = b.weight(n + ".w", 2 * hidden);
    return b.op(n, {in, w}, act, 8.0 * static_cast<double>(tokens * hidden), true, false,
                tokens * 8);
  };
  auto dropout = [&](const std::string& n, std::size_t in) {
    return b.op(n, {in}, act, 0, false, false, tokens * hidden);
  };
  for (int l = 0; l < s.layers; ++l) {
    const std::string n = "h" + std::to_string(l);
    const std::size_t in = x;
    std::size_t y = layer_norm(n + ".ln1", in);
    y = linear(n + ".qkv", y, 3 * hidden, hidden);
    // Attention: saves q, k, v (its input) and the probabilities (internal), holds the scores
    // as a transient.
    const size_type probs = b.bytes(s.batch * heads * s.sequence_length * s.sequence_length);
    y = b.op(n + ".attn", {y}, act,
             4.0 * static_cast<double>(s.batch * s.sequence_length * s.sequence_length * hidden),
             true, false, probs, probs);
    y = linear(n + ".proj", y, hidden, hidden);
    y = dropout(n + ".drop1", y);
    x = b.op(n + ".add1", {y, in}, act, 0, false);
    y = layer_norm(n + ".ln2", x);
    y = linear(n + ".fc1", y, 4 * hidden, hidden);
    y = b.op(n + ".gelu", {y}, b.bytes(tokens * 4 * hidden), 0, true);
    y = linear(n + ".fc2", y, hidden, 4 * hidden);
    y = dropout(n + ".drop2", y);
    x = b.op(n + ".add2", {y, x}, act, 0, false);
  }
  x = layer_norm("ln_f", x);
  b.op("lm_head", {x, wte}, b.bytes(tokens * vocab),
       2.0 * static_cast<double>(tokens * hidden * vocab), true);
  return {s.model, std::move(b.g)};
}

}  // namespace detail::graphs

/// The models `build_graph` knows: the zoo's ResNets (not resnet1001), DenseNet-121, GPT-2, and
/// `unet`.
inline constexpr std::array<std::string_view, 9> graph_model_names = {
    "resnet50",   "resnet101",   "resnet152",  "densenet121", "gpt2-small",
    "gpt2-medium", "gpt2-large", "gpt2-xl",    "unet"};

/// The op-level graph of `model` (see graph_model_names) with the zoo's options (`operators`
/// does not apply); `unet` takes a CNN's options. Throws `zoo_error` for an unknown model or
/// bad options.
inline graph_network build_graph(std::string_view model, const options& opts) {
  const bool is_unet = model == "unet";
  const settings s = detail::settings_of(is_unet ? std::string_view("resnet50") : model, opts);
  if (is_unet) return detail::graphs::unet(s);
  if (model == "resnet50") return detail::graphs::resnet(s, {3, 4, 6, 3});
  if (model == "resnet101") return detail::graphs::resnet(s, {3, 4, 23, 3});
  if (model == "resnet152") return detail::graphs::resnet(s, {3, 8, 36, 3});
  if (model == "densenet121") return detail::graphs::densenet121(s);
  if (const std::optional<detail::gpt2_config> t = detail::gpt2_config_of(model))
    return detail::graphs::gpt2(s, t->hidden, t->heads);
  detail::throw_zoo_error("no op-level graph of \"" + std::string(model) + "\" (graphs: resnet50, "
                  "resnet101, resnet152, densenet121, gpt2-*, unet)");
}

}  // namespace remat::zoo

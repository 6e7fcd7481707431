// The zoo's CNNs: ResNet-50/101/152 and -1001, VGG-16/19, DenseNet-121, stage by stage (the
// layer details are in remat/zoo.hpp's comment).
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

// The ImageNet stem of ResNet and DenseNet, one stage: 7x7 convolution to 64 channels (stride
// 2), batch norm, ReLU, 3x3 max pooling (stride 2). Returns its output's shape.
inline fmap imagenet_stem(const context& cx, size_type image) {
  cnn_stage st(cx, 3, image, image);
  fmap x = st.batch_norm(st.conv(st.input(), 64, 7, 2, 3));
  st.relu_in_place(x);
  x = st.max_pool(x, 3, 2, 1);
  cx.push("stem", st, x);
  return stage_output_shape(x);
}

inline void resnet(const context& cx, size_type image, const std::array<int, 4>& blocks) {
  fmap x = imagenet_stem(cx, image);
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
  fmap x = imagenet_stem(cx, image);
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

}  // namespace remat::zoo::detail

// Two small real networks written with torch::nn, cut into stages at block granularity: a ResNet
// of bottleneck blocks with batch norm, and a GPT-style transformer (causal attention, MLP, layer
// norm, dropout). Randomly initialized: no weights are needed to train them a few steps. The
// example and the tests of remat::torch use them.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace models {

// 1x1 conv to `mid`, 3x3 conv (stride), 1x1 conv to `out`, each with batch norm; the shortcut
// is a 1x1 conv with batch norm when the shape changes.
struct BottleneckImpl : torch::nn::Module {
  BottleneckImpl(std::int64_t in, std::int64_t mid, std::int64_t out, std::int64_t stride)
      : conv1(torch::nn::Conv2dOptions(in, mid, 1).bias(false)),
        bn1(mid),
        conv2(torch::nn::Conv2dOptions(mid, mid, 3).stride(stride).padding(1).bias(false)),
        bn2(mid),
        conv3(torch::nn::Conv2dOptions(mid, out, 1).bias(false)),
        bn3(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    register_module("conv3", conv3);
    register_module("bn3", bn3);
    if (in != out || stride != 1) {
      shortcut = register_module(
          "shortcut",
          torch::nn::Sequential(
              torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
              torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1(conv1(x)));
    y = torch::relu(bn2(conv2(y)));
    y = bn3(conv3(y));
    return torch::relu(y + (shortcut ? shortcut->forward(x) : x));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Conv2d conv3;
  torch::nn::BatchNorm2d bn3;
  torch::nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(Bottleneck);

// 3x3 conv, batch norm, ReLU.
struct StemImpl : torch::nn::Module {
  explicit StemImpl(std::int64_t width)
      : conv(torch::nn::Conv2dOptions(3, width, 3).padding(1).bias(false)), bn(width) {
    register_module("conv", conv);
    register_module("bn", bn);
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::relu(bn(conv(x))); }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
};
TORCH_MODULE(Stem);

// Global average pool, then a linear classifier.
struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl(std::int64_t channels, std::int64_t classes) : fc(channels, classes) {
    register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x.mean({2, 3})); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Classifier);

// The stem and the classifier are stages of their own, every bottleneck block is one.
inline torch::nn::Sequential resnet(std::int64_t blocks, std::int64_t width, std::int64_t classes) {
  torch::nn::Sequential net;
  net->push_back(Stem(width));
  std::int64_t channels = width;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const bool down = b > 0 && b % 2 == 0;  // halve the resolution every other block
    const std::int64_t out = down ? channels * 2 : channels;
    net->push_back(Bottleneck(channels, out / 4 < 4 ? 4 : out / 4, out, down ? 2 : 1));
    channels = out;
  }
  net->push_back(Classifier(channels, classes));
  return net;
}

// Token and position embeddings, with dropout.
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(std::int64_t vocab, std::int64_t context, std::int64_t dim, double p)
      : tokens(vocab, dim), positions(context, dim), dropout(p) {
    register_module("tokens", tokens);
    register_module("positions", positions);
    register_module("dropout", dropout);
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    const torch::Tensor pos = torch::arange(ids.size(1), ids.options());
    return dropout(tokens(ids) + positions(pos));
  }
  torch::nn::Embedding tokens, positions;
  torch::nn::Dropout dropout;
};
TORCH_MODULE(Embedding);

// Pre-norm block: x + attention(ln(x)), then x + mlp(ln(x)); causal multi-head attention with
// dropout on the attention weights and on both residual branches.
struct BlockImpl : torch::nn::Module {
  BlockImpl(std::int64_t dim, std::int64_t head_count, double p)
      : heads(head_count),
        ln1(torch::nn::LayerNormOptions({dim})),
        ln2(torch::nn::LayerNormOptions({dim})),
        qkv(dim, 3 * dim),
        proj(dim, dim),
        fc1(dim, 4 * dim),
        fc2(4 * dim, dim),
        attn_dropout(p),
        dropout(p) {
    register_module("ln1", ln1);
    register_module("ln2", ln2);
    register_module("qkv", qkv);
    register_module("proj", proj);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("attn_dropout", attn_dropout);
    register_module("dropout", dropout);
  }
  // One statement per op, reassigning: a C++ temporary lives to the end of its full expression,
  // so a block written as one expression would hold every intermediate of a no-grad forward at
  // once (the recording forward saves most of them anyway). The no-grad forward's transient is
  // what remat's model charges every forward of the stage.
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor a = ln1(x);
    a = attention(a);
    a = proj(a);
    a = dropout(a);
    const torch::Tensor h = x + a;
    a = ln2(h);
    a = fc1(a);
    a = torch::gelu(a);
    a = fc2(a);
    a = dropout(a);
    return h + a;
  }
  torch::Tensor attention(const torch::Tensor& x) {
    const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / heads;
    torch::Tensor w, v;
    {
      const torch::Tensor parts = qkv(x).view({B, T, 3, heads, D}).permute({2, 0, 3, 1, 4});
      v = parts[2];
      w = torch::matmul(parts[0], parts[1].transpose(-2, -1));
    }
    w = w / std::sqrt(static_cast<double>(D));
    w = w.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
    w = torch::softmax(w, -1);
    w = attn_dropout(w);
    w = torch::matmul(w, v);
    return w.transpose(1, 2).reshape({B, T, C});
  }
  std::int64_t heads;
  torch::nn::LayerNorm ln1, ln2;
  torch::nn::Linear qkv, proj, fc1, fc2;
  torch::nn::Dropout attn_dropout, dropout;
};
TORCH_MODULE(Block);

// Final layer norm and the projection to the vocabulary.
struct LogitsImpl : torch::nn::Module {
  LogitsImpl(std::int64_t dim, std::int64_t vocab)
      : ln(torch::nn::LayerNormOptions({dim})), out(dim, vocab) {
    register_module("ln", ln);
    register_module("out", out);
  }
  torch::Tensor forward(const torch::Tensor& x) { return out(ln(x)); }
  torch::nn::LayerNorm ln;
  torch::nn::Linear out;
};
TORCH_MODULE(Logits);

// Token ids [batch, time] to logits [batch, time, vocab]: embedding, `layers` blocks, final layer
// norm and the output projection (one stage).
inline torch::nn::Sequential gpt(std::int64_t layers, std::int64_t dim, std::int64_t heads,
                                 std::int64_t vocab, std::int64_t context, double dropout) {
  torch::nn::Sequential net;
  net->push_back(Embedding(vocab, context, dim, dropout));
  for (std::int64_t l = 0; l < layers; ++l) net->push_back(Block(dim, heads, dropout));
  net->push_back(Logits(dim, vocab));
  return net;
}

// Next-token cross entropy of logits [batch, time, vocab] against targets [batch, time].
inline torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              targets.reshape({-1}));
}

}  // namespace models

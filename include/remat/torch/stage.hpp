// A libtorch model as remat sees it: a chain of stages, each a function `tensor -> tensor` with
// the parameters and buffers it owns (docs/libtorch.md, "Stages").
//
//   auto a = remat::torch::stages_of(net);            // torch::nn::Sequential: one per child
//   auto b = remat::torch::stages_of(pieces);         // torch::jit::Modules, module holders,
//                                                     // or callables
//   auto c = remat::torch::stages_of(script_seq);     // a scripted torch.nn.Sequential
//
// What remat protects, and how. Profiling runs every stage several times and a schedule may run
// a stage more than once (a recomputation); neither may change what plain autograd would leave:
//
//   parameters  every leaf tensor a stage's backward accumulates into. They are found in the
//               graph each recording forward builds (its AccumulateGrad nodes), whether or not
//               the stage declares them, so no gradient is ever changed by a stage that did not
//               say it had parameters (a lambda calling a script module, a weight shared by
//               every stage of an unrolled recurrent cell).
//   buffers     state a forward updates in place (batch norm's running statistics and its
//               count of batches). The graph cannot show them, so a stage declares them: a
//               `torch::nn::Module` or a `torch::jit::Module` declares its own; a hand-made
//               stage sets `buffers` (an empty vector says "none"). A stage that declares
//               nothing and records batch norm is refused with `model_error`, since its
//               statistics would be updated by every profiling run and every recomputation.
//               State that a stage updates in place by other means (a counter, a cache) must be
//               declared too: remat cannot see it.
#pragma once

#include <remat/concepts.hpp>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ranges>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace remat::torch {

/// One stage: its forward, and what it owns. `{forward}`, `{forward, module}`,
/// `{forward, nullptr, parameters, buffers}`.
struct stage {
  stage() = default;
  stage(std::function<at::Tensor(const at::Tensor&)> forward_,
        std::shared_ptr<::torch::nn::Module> module_ = nullptr,
        std::vector<at::Tensor> parameters_ = {},
        std::optional<std::vector<at::Tensor>> buffers_ = std::nullopt)
      : forward(std::move(forward_)),
        module(std::move(module_)),
        parameters(std::move(parameters_)),
        buffers(std::move(buffers_)) {}

  std::function<at::Tensor(const at::Tensor&)> forward;
  /// The module holding its parameters and buffers (stages of a `torch::nn::Sequential`, module
  /// holders in a range); may be null.
  std::shared_ptr<::torch::nn::Module> module;
  /// Parameters besides the module's. Optional: every parameter the stage's graph reaches is
  /// protected whether declared or not.
  std::vector<at::Tensor> parameters;
  /// Buffers besides the module's; set (even to an empty vector) to declare that the stage has
  /// no other state. A stage without a module and without `buffers` declares nothing.
  std::optional<std::vector<at::Tensor>> buffers;

  /// Other ways to record the stage, options 1, 2, ... of F_all(k, o) (option 0 is `forward`):
  /// the same function as `forward`, bit for bit, with another tape or time (a fused op, an
  /// autograd function that saves less and recomputes in its backward). Profiling measures each
  /// and checks it against `forward` (docs/libtorch.md, "Alternatives"); the no-grad forwards
  /// (F_none, F_ck) run `forward`.
  std::vector<std::function<at::Tensor(const at::Tensor&)>> alternatives;

  /// Whether the stage says what its buffers are (a module, or `buffers` set).
  [[nodiscard]] bool declares_buffers() const noexcept {
    return module != nullptr || buffers.has_value();
  }
  /// How many ways it has to record: 1 + `alternatives.size()`.
  [[nodiscard]] std::size_t option_count() const noexcept { return 1 + alternatives.size(); }
  /// The recording forward of option `o` (< `option_count()`): `forward`, or `alternatives[o - 1]`.
  [[nodiscard]] const std::function<at::Tensor(const at::Tensor&)>& recording(std::size_t o) const {
    return o == 0 ? forward : alternatives.at(o - 1);
  }
};

/// `option 2 (alternatives[1])`, `option 0 (forward)`: how errors name option `o` of a stage.
inline std::string option_name(std::size_t o) {
  return "option " + std::to_string(o) +
         (o == 0 ? std::string(" (forward)") : " (alternatives[" + std::to_string(o - 1) + "])");
}

/// Input a stage does not accept as given: names the stage (or none), and the op where it was
/// found when there is one, and what is wrong.
class model_error : public std::invalid_argument {
 public:
  static constexpr std::size_t no_stage = static_cast<std::size_t>(-1);
  model_error(std::size_t stage_index, const std::string& what)
      : std::invalid_argument(
            stage_index == no_stage ? what : "stage " + std::to_string(stage_index) + ": " + what),
        stage_index_(stage_index) {}
  /// "stage 3, F_all: ..." (or "the loss: ..." for `no_stage`).
  model_error(std::size_t stage_index, const std::string& op, const std::string& what)
      : std::invalid_argument((stage_index == no_stage
                                   ? "the loss"
                                   : "stage " + std::to_string(stage_index) + ", " + op) +
                              ": " + what),
        stage_index_(stage_index) {}
  [[nodiscard]] std::size_t stage_index() const noexcept { return stage_index_; }

 private:
  std::size_t stage_index_;
};

/// A loss: the scalar to minimize, from the last stage's output.
using loss_function = std::function<at::Tensor(const at::Tensor&)>;

/// The shape and type of a tensor, as profiled.
struct tensor_shape {
  std::vector<std::int64_t> sizes;
  at::ScalarType dtype = at::ScalarType::Undefined;

  static tensor_shape of(const at::Tensor& t) { return {t.sizes().vec(), t.scalar_type()}; }
  friend bool operator==(const tensor_shape&, const tensor_shape&) = default;
};

/// `[2, 3, 4] Float`.
inline std::string to_string(const tensor_shape& s) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < s.sizes.size(); ++i) out << (i ? ", " : "") << s.sizes[i];
  out << "] " << c10::toString(s.dtype);
  return out.str();
}

/// A TorchScript module as one stage: `forward` on one tensor, its parameters and buffers
/// declared. It runs in whatever mode (`train()`, `eval()`) the module is in.
inline stage stage_of(const ::torch::jit::Module& m) {
  stage s;
  for (const at::Tensor& p : m.parameters(/*recurse=*/true)) s.parameters.push_back(p);
  s.buffers.emplace();
  for (const at::Tensor& b : m.buffers(/*recurse=*/true)) s.buffers->push_back(b);
  s.forward = [mod = m](const at::Tensor& x) mutable { return mod.forward({x}).toTensor(); };
  return s;
}

/// A `torch::nn::Sequential` as one stage, its children in order.
inline stage stage_of(const ::torch::nn::Sequential& seq) {
  return {[impl = seq.ptr()](const at::Tensor& x) { return impl->forward(x); }, seq.ptr()};
}

/// A module holder (`torch::nn::Linear`, a `TORCH_MODULE` type) keeps its module; any other
/// callable `tensor -> tensor` declares nothing. Callables must be copyable.
template <class C>
  requires std::invocable<C&, at::Tensor> &&
           std::convertible_to<std::invoke_result_t<C&, at::Tensor>, at::Tensor>
stage stage_of(const C& c) {
  static_assert(std::is_copy_constructible_v<C>, "a stage must be copyable");
  stage s;
  if constexpr (requires { std::shared_ptr<::torch::nn::Module>(c.ptr()); }) s.module = c.ptr();
  s.forward = [f = c](const at::Tensor& x) mutable { return at::Tensor(f(x)); };
  return s;
}

inline stage stage_of(stage s) {
  return s;
}

/// Anything `stage_of` takes.
template <class T>
concept stage_like = requires(const T& t) {
  { stage_of(t) } -> std::same_as<stage>;
};

/// A range of stages, TorchScript modules, module holders or callables `tensor -> tensor`.
template <class R>
concept stage_range =
    std::ranges::input_range<R> && stage_like<std::remove_cvref_t<std::ranges::range_reference_t<R>>>;

/// The stages of a `torch::nn::Sequential`, one per child, in order.
inline std::vector<stage> stages_of(const ::torch::nn::Sequential& seq) {
  std::vector<stage> out;
  out.reserve(seq->size());
  for (std::size_t i = 0; i < seq->size(); ++i) {
    ::torch::nn::AnyModule any = *(seq->begin() + static_cast<std::ptrdiff_t>(i));
    stage s;
    s.forward = [any](const at::Tensor& x) mutable { return any.forward(x); };
    s.module = seq->ptr(i);
    out.push_back(std::move(s));
  }
  return out;
}

/// The stages of a scripted `torch.nn.Sequential`, one per child, in order. Any other script
/// module is refused: its forward need not be its children in order (a ResNet flattens between
/// its pooling and its classifier); pass its pieces as a range instead, or cut its forward's
/// graph with `split_script` (script.hpp).
inline std::vector<stage> stages_of(const ::torch::jit::Module& seq) {
  const std::string type = seq.type()->name() ? seq.type()->name()->qualifiedName() : "?";
  if (type.find("torch.nn.modules.container.Sequential") == std::string::npos)
    throw model_error(model_error::no_stage,
                      "stages_of: the script module (" + type +
                          ") is not a torch.nn.Sequential, so its children need not be its "
                          "forward in order; pass its pieces as a range of modules, or cut "
                          "its forward's graph with split_script (remat/torch/script.hpp)");
  std::vector<stage> out;
  for (const ::torch::jit::Module& child : seq.children()) out.push_back(stage_of(child));
  return out;
}

/// The stages of a range, one per element (see `stage_of`).
template <stage_range R>
std::vector<stage> stages_of(R&& range) {
  std::vector<stage> out;
  for (auto&& e : range) out.push_back(stage_of(e));
  return out;
}

inline std::vector<stage> stages_of(std::vector<stage> stages) {
  return stages;
}

namespace detail {

// Appends `t` to `out` unless the same tensor is there.
inline void add_unique(std::vector<at::Tensor>& out, const at::Tensor& t) {
  if (std::none_of(out.begin(), out.end(), [&](const at::Tensor& u) { return u.is_same(t); }))
    out.push_back(t);
}

inline std::vector<at::Tensor> declared_parameters(const stage& s) {
  std::vector<at::Tensor> out;
  if (s.module)
    for (const at::Tensor& p : s.module->parameters(/*recurse=*/true))
      if (p.requires_grad()) add_unique(out, p);
  for (const at::Tensor& p : s.parameters)
    if (p.requires_grad()) add_unique(out, p);
  return out;
}

inline std::vector<at::Tensor> buffers_of(const stage& s) {
  std::vector<at::Tensor> out;
  if (s.module)
    for (const at::Tensor& b : s.module->buffers(/*recurse=*/true)) add_unique(out, b);
  if (s.buffers)
    for (const at::Tensor& b : *s.buffers) add_unique(out, b);
  return out;
}

// What a recorded graph shows: the leaves its backward accumulates into (other than `input`),
// and the name of a batch-norm node if it has one.
struct recorded {
  std::vector<at::Tensor> leaves;
  std::string batch_norm;
};

inline recorded walk_graph(const at::Tensor& output, const at::Tensor& input) {
  recorded out;
  std::vector<::torch::autograd::Node*> stack;
  std::unordered_set<const ::torch::autograd::Node*> seen;
  if (output.defined() && output.grad_fn()) {
    stack.push_back(output.grad_fn().get());
    seen.insert(stack.back());
  }
  while (!stack.empty()) {
    ::torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (const auto* acc = dynamic_cast<const ::torch::autograd::AccumulateGrad*>(node)) {
      if (!input.defined() || !acc->variable.is_same(input)) add_unique(out.leaves, acc->variable);
      continue;
    }
    if (out.batch_norm.empty() && node->name().find("BatchNorm") != std::string::npos)
      out.batch_norm = node->name();
    for (const ::torch::autograd::Edge& e : node->next_edges())
      if (e.function && seen.insert(e.function.get()).second) stack.push_back(e.function.get());
  }
  return out;
}

// What is wrong with a stage that records `graph`, or nothing: batch norm without saying what
// its buffers are.
inline std::string buffers_problem(const stage& s, const recorded& graph) {
  if (graph.batch_norm.empty() || s.declares_buffers()) return {};
  return "records batch norm (" + graph.batch_norm +
         ") but declares no buffers, so profiling and recomputation would update its running "
         "statistics more than once (the forward that found this has updated them, if in "
         "training mode); make it a torch::nn::Module or torch::jit::Module stage (stages_of), "
         "or set stage::buffers to its running statistics and batch count (an empty vector if "
         "it has none to protect)";
}

inline void check_buffers_declared(std::size_t k, const stage& s, const recorded& graph) {
  if (std::string m = buffers_problem(s, graph); !m.empty()) throw model_error(k, m);
}

// libtorch's message without its backtrace, on one line.
inline std::string message_of(const c10::Error& e) {
  std::string m = e.what_without_backtrace();
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// Runs `f`, turning an error libtorch raises into a `model_error` naming stage `k` and `op`.
template <class F>
decltype(auto) in_stage(std::size_t k, const std::string& op, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const c10::Error& e) {
    throw model_error(k, op, "libtorch: " + message_of(e));
  }
}

}  // namespace detail

}  // namespace remat::torch

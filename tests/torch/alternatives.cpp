// Stages with alternative implementations (stage::alternatives): profiled each, chosen by the
// solver where they pay, run by the executor with autograd's gradients bit for bit, and refused
// by name where they do not compute what the stage's forward computes.
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <chain_cases.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int tanhs = 4;
constexpr std::int64_t batch = 32, width = 256;

// y = tanh(tanh(tanh(tanh(h)))), saving only h and y: the backward recomputes the three
// intermediates and runs the kernels plain autograd runs (TanhBackward0 is tanh_backward of the
// gradient and the result), so its gradients are autograd's bit for bit. Plain autograd saves
// every tanh's result (four tensors of h's size); this saves two.
struct recomputed_tanhs : torch::autograd::Function<recomputed_tanhs> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& h) {
    at::Tensor u = h;
    for (int i = 0; i < tanhs; ++i) u = at::tanh(u);
    ctx->save_for_backward({h, u});
    return u;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> u{saved[0]};  // u[j] = tanh^j(h)
    for (int j = 1; j < tanhs; ++j) u.push_back(at::tanh(u.back()));
    at::Tensor g = at::tanh_backward(grads[0], saved[1]);
    while (u.size() > 1) {
      g = at::tanh_backward(g, u.back());
      u.pop_back();
    }
    return {g};
  }
};

at::Tensor plain_tanhs(at::Tensor u) {
  for (int i = 0; i < tanhs; ++i) u = at::tanh(u);
  return u;
}

// Six stages, each a linear layer and four tanhs; stages 1 to 4 can also be recorded with
// `recomputed_tanhs`, which tapes two of h's size instead of four and whose backward re-runs
// three tanhs, much less than the linear layer a checkpoint re-runs.
chain_cases::model tanh_mlp() {
  torch::manual_seed(21);
  chain_cases::model m{"tanh-mlp", {}, torch::randn({batch, width}), {}, {}, {}};
  for (int k = 0; k < 6; ++k) {
    torch::nn::Linear lin(width, width);
    chain_cases::add_module_state(m, *lin);
    remat::torch::stage s([lin](const at::Tensor& x) mutable { return plain_tanhs(lin(x)); },
                          lin.ptr());
    if (k >= 1 && k <= 4)
      s.alternatives.push_back(
          [lin](const at::Tensor& x) mutable { return recomputed_tanhs::apply(lin(x)); });
    m.stages.push_back(std::move(s));
  }
  const at::Tensor target = torch::randn({batch, width});
  m.loss = [target](const at::Tensor& y) { return torch::mse_loss(y, target); };
  return m;
}

bool records_an_alternative(const remat::schedule& s) {
  return std::any_of(s.ops.begin(), s.ops.end(), [](const remat::op& o) {
    return o.kind == remat::op_kind::forward_all && o.option != 0;
  });
}

// The chain as the stages without alternatives give it: each stage's own fields are option 0's.
remat::chain without_options(remat::chain c) {
  for (remat::stage& s : c.stages) s.options.clear();
  return c;
}

}  // namespace

TEST_CASE("alternatives: profiled each, sizes identical from run to run") {
  at::set_num_threads(1);
  const chain_cases::model m = tanh_mlp();
  const remat::torch::profiled_chain a = remat::torch::profile(m.stages, m.input, m.loss);
  const remat::torch::profiled_chain b = remat::torch::profile(m.stages, m.input, m.loss);
  const remat::size_type unit = batch * width * 4;  // h's bytes, and every output's
  REQUIRE(a.option_backward_slack.size() == 6);
  for (std::size_t k = 0; k < 6; ++k) {
    CAPTURE(k);
    const remat::stage& s = a.chain.stages[k];
    CHECK(s.output_size == unit);
    CHECK(s.tape_size == tanhs * unit);  // every tanh's result; the linear saves its input
    if (k == 0 || k == 5) {
      CHECK(s.options.empty());  // a stage without alternatives is measured as it always was
      CHECK(a.option_backward_slack[k].empty());
      continue;
    }
    REQUIRE(s.options.size() == 2);
    const remat::stage_option& plain = s.options[0];
    const remat::stage_option& alt = s.options[1];
    // Option 0 is the stage's own fields.
    CHECK(plain.tape_size == s.tape_size);
    CHECK(plain.forward_overhead == remat::recording_overhead(s));
    CHECK(plain.backward_overhead == s.backward_overhead);
    CHECK(plain.backward_time == s.backward_time);
    CHECK(alt.tape_size == 2 * unit);     // h and y
    CHECK(alt.forward_overhead == unit);  // two tanhs' results beside h while the next is made
    CHECK(alt.backward_overhead > plain.backward_overhead);  // the tanhs re-run
    CHECK(alt.forward_time > 0);
    CHECK(alt.backward_time > 0);
    CHECK(b.chain.stages[k].options.size() == 2);
    for (std::size_t o = 0; o < 2; ++o) {
      CHECK(b.chain.stages[k].options[o].tape_size == s.options[o].tape_size);
      CHECK(b.chain.stages[k].options[o].forward_overhead == s.options[o].forward_overhead);
      CHECK(b.chain.stages[k].options[o].backward_overhead == s.options[o].backward_overhead);
    }
    CHECK(a.option_backward_slack[k] == b.option_backward_slack[k]);
    CHECK(a.option_backward_slack[k][0] == a.backward_slack[k]);
  }
}

TEST_CASE("alternatives: chosen where they pay, autograd's gradients, every op's peak predicted") {
  at::set_num_threads(1);
  const chain_cases::model m = tanh_mlp();
  // Every solver at four budgets from its least to store-all (chain_cases).
  remat::torch::profiled_chain p = chain_cases::check_every_schedule(m);
  // What is asserted below compares makespans, so the times are fixed rather than measured (the
  // sizes stay as measured, so every op's memory is still predicted exactly): a stage's linear
  // layer and four tanhs take 10 forward and 20 backward; the alternative records in the same
  // time and its backward re-runs three tanhs (3 more), far less than the 10 of the forward a
  // checkpoint re-runs.
  for (remat::stage& st : p.chain.stages) {
    st.forward_time = 10;
    st.backward_time = 20;
    for (std::size_t o = 0; o < st.options.size(); ++o) {
      st.options[o].forward_time = 10;
      st.options[o].backward_time = o == 0 ? 20 : 23;
    }
  }
  const remat::chain plain = without_options(p.chain);
  const remat::size_type least = remat::solve(p.chain, 0).min_feasible_budget;
  const remat::size_type plain_least = remat::solve(plain, 0).min_feasible_budget;
  CHECK(least <= plain_least);  // option 0 is the plain stage: never worse
  MESSAGE("least budget " << least << " bytes with alternatives, " << plain_least << " without");
  const remat::size_type store_all =
      remat::solve(plain, remat::max_size, {.solver = remat::solver::store_all})
          .schedule.peak_memory;
  // The optimal solver at 24 budgets from the least to store-all: at some, the schedule records
  // with an alternative and is faster than any schedule of the plain stages; at every one,
  // gradients, input gradient and each op's peak are as plain autograd and the profile say.
  const chain_cases::state before = chain_cases::state_of(m);
  remat::torch::executor ex(m.stages);
  ex.use_profile(p);
  int faster = 0, with_alternatives = 0;
  for (int i = 0; i <= 23; ++i) {
    const remat::size_type budget = least + (store_all - least) * i / 23;
    CAPTURE(budget);
    const remat::torch::step_result r = chain_cases::step_beside_autograd(m, ex, before, budget);
    CHECK(r.as_predicted);
    CHECK(r.op_peaks == r.expected_op_peaks);
    CHECK(r.measured_peak <= budget);
    if (!records_an_alternative(r.schedule)) continue;
    ++with_alternatives;
    // Below the middle, where the plain stages recompute a linear layer that an alternative's
    // backward does not (10 against its three tanhs' 3).
    const remat::solve_result without = remat::solve(plain, budget);
    if (i <= 11 && (!without.feasible || r.schedule.makespan < without.schedule.makespan)) ++faster;
  }
  MESSAGE("alternatives recorded at " << with_alternatives << " of 24 budgets; faster than the "
                                      << "plain stages' at " << faster << " of the lower 12");
  CHECK(faster > 0);
}

// Whether `s` offloads a tape that an alternative recorded.
bool offloads_an_alternative(const remat::schedule& s) {
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const remat::op& o = s.ops[i];
    if (o.kind != remat::op_kind::offload || o.tensor != remat::tensor_kind::tape) continue;
    for (std::size_t j = i; j-- > 0;)  // the F_all that recorded t_k
      if (s.ops[j].kind == remat::op_kind::forward_all && s.ops[j].stage == o.stage - 1) {
        if (s.ops[j].option != 0) return true;
        break;
      }
  }
  return false;
}

TEST_CASE("alternatives: a tape an alternative recorded is offloaded whole") {
  at::set_num_threads(1);
  const chain_cases::model m = tanh_mlp();
  remat::torch::executor ex(m.stages,
                            {.solve = {.solver = remat::solver::offload}, .transfer = {2e7, 2e7}});
  // A link of 20 GB/s: moving a tape costs less than recomputing it, on either libtorch. The
  // offloading solver records each stage with its fastest option; whether that is the
  // alternative depends on the measured times, so the alternatives are made the faster here.
  // The sizes stay as measured, so every op's memory is still predicted exactly: what is tested
  // is that the executor moves the tape an alternative recorded, whole.
  remat::torch::profiled_chain p = ex.profile(m.input, m.loss);
  for (remat::stage& st : p.chain.stages)
    if (st.options.size() == 2) {
      st.options[1].forward_time = st.options[0].forward_time;
      st.options[1].backward_time = st.options[0].backward_time / 2;
    }
  ex.use_profile(p);
  const remat::chain& ch = p.chain;
  const remat::size_type least =
      remat::solve(ch, 0, {.solver = remat::solver::offload}).min_feasible_budget;
  const remat::size_type store_all =
      remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all}).schedule.peak_memory;
  int runs = 0;
  for (int i = 0; i <= 47; ++i) {
    const remat::size_type budget = least + (store_all - least) * i / 47;
    if (!offloads_an_alternative(
            remat::solve(ch, budget, {.solver = remat::solver::offload}).schedule))
      continue;
    CAPTURE(budget);
    const chain_cases::state before = chain_cases::state_of(m);
    const remat::torch::step_result r = chain_cases::step_beside_autograd(m, ex, before, budget);
    CHECK(r.measured_peak <= r.schedule.peak_memory);
    if (++runs == 3) break;
  }
  MESSAGE("steps whose schedule offloads an alternative's tape: " << runs);
  CHECK(runs > 0);
}

namespace {

// Two stages: a linear layer declaring a buffer besides its module's, then a linear layer with
// batch norm and a tanh, with one alternative.
struct two_stages {
  torch::nn::Linear first{8, 8};
  torch::nn::Sequential second =
      torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::BatchNorm1d(8));
  at::Tensor counter = torch::zeros({3});

  // The profile refuses `alternative` with `message`, and leaves the model as it was.
  void check_refused(const std::function<at::Tensor(const at::Tensor&)>& alternative,
                     const std::string& message) const {
    std::vector<remat::torch::stage> stages{
        {[l = first](const at::Tensor& x) mutable { return l(x); },
         first.ptr(),
         {},
         std::vector<at::Tensor>{counter}},
        {[s = second.ptr()](const at::Tensor& x) { return at::tanh(s->forward(x)); },
         second.ptr()}};
    stages[1].alternatives.push_back(alternative);
    const std::vector<at::Tensor> buffers = second->buffers();
    std::vector<at::Tensor> values;
    for (const at::Tensor& b : buffers) values.push_back(b.clone());
    CHECK_THROWS_WITH_AS(remat::torch::profile(stages, torch::randn({5, 8}),
                                               [](const at::Tensor& y) { return y.pow(2).sum(); }),
                         doctest::Contains(message.c_str()), remat::torch::model_error);
    for (const at::Tensor& q : first->parameters()) CHECK(!q.grad().defined());
    for (const at::Tensor& q : second->parameters()) CHECK(!q.grad().defined());
    CHECK(torch::equal(counter, torch::zeros({3})));
    for (std::size_t i = 0; i < buffers.size(); ++i) CHECK(torch::equal(buffers[i], values[i]));
  }
};

}  // namespace

TEST_CASE("alternatives: one that does not compute what forward computes is refused by name") {
  at::set_num_threads(1);
  torch::manual_seed(22);
  const two_stages m;
  const std::shared_ptr<torch::nn::SequentialImpl> s = m.second.ptr();
  const std::string name = "stage 1, option 1 (alternatives[0]): ";
  SUBCASE("the same function: accepted") {
    std::vector<remat::torch::stage> stages{
        {[s](const at::Tensor& x) { return at::tanh(s->forward(x)); }, s}};
    stages[0].alternatives.push_back([s](const at::Tensor& x) { return at::tanh(s->forward(x)); });
    const remat::torch::profiled_chain p = remat::torch::profile(
        stages, torch::randn({5, 8}), [](const at::Tensor& y) { return y.pow(2).sum(); });
    CHECK(p.chain.stages[0].options.size() == 2);
  }
  SUBCASE("another shape") {
    m.check_refused([s](const at::Tensor& x) { return at::tanh(s->forward(x)).narrow(1, 0, 4); },
                    name + "its output is [5, 4] Float, forward's [5, 8] Float");
  }
  SUBCASE("another dtype") {
    m.check_refused([s](const at::Tensor& x) { return at::tanh(s->forward(x)).to(at::kDouble); },
                    name + "its output is [5, 8] Double, forward's [5, 8] Float");
  }
  SUBCASE("a fused formula that rounds differently") {
    m.check_refused(
        [s](const at::Tensor& x) {
          const at::Tensor e = at::exp(2 * s->forward(x));
          return (e - 1) / (e + 1);
        },
        name + "its output differs from forward's on the profiling sample");
  }
  SUBCASE("the same values, another gradient") {
    m.check_refused(
        [s](const at::Tensor& x) {
          const at::Tensor y = at::tanh(s->forward(x));
          return y.detach() + (y - y.detach()) * 2;  // y's values, twice y's gradient
        },
        name + "its backward gives another gradient of the input");
  }
  SUBCASE("its buffers updated twice") {
    m.check_refused(
        [s](const at::Tensor& x) {
          s->forward(x);  // batch norm's statistics move once more
          return at::tanh(s->forward(x));
        },
        name + "it leaves the stage's buffer of [8] Float other than forward leaves it");
  }
  SUBCASE("a parameter the stage does not own") {
    const at::Tensor w = torch::ones({}).requires_grad_(true);
    m.check_refused([s, w](const at::Tensor& x) { return at::tanh(s->forward(x)) * w; },
                    name + "its graph reaches a parameter of [] Float that the stage does not own");
    CHECK(!w.grad().defined());
  }
  SUBCASE("a write into another stage's buffer") {
    m.check_refused(
        [s, c = m.counter](const at::Tensor& x) mutable {
          c.add_(1);
          return at::tanh(s->forward(x));
        },
        name + "writes in place into a parameter or into another stage's buffer");
  }
  SUBCASE("a write into a parameter") {
    m.check_refused(
        [s](const at::Tensor& x) {
          {
            const at::NoGradGuard no_grad;
            s->parameters()[0].mul_(1);
          }
          return at::tanh(s->forward(x));
        },
        name + "writes in place into a parameter or into another stage's buffer");
  }
  SUBCASE("a libtorch error inside it") {
    m.check_refused([s](const at::Tensor& x) { return at::tanh(s->forward(x.t())); },
                    "stage 1, option 1 (alternatives[0]), forward (recording): libtorch: ");
  }
}

TEST_CASE("alternatives: a profile listing more options than a stage has is refused") {
  const two_stages m;
  const std::shared_ptr<torch::nn::SequentialImpl> s = m.second.ptr();
  std::vector<remat::torch::stage> stages{
      {[s](const at::Tensor& x) { return at::tanh(s->forward(x)); }, s}};
  const auto loss = [](const at::Tensor& y) { return y.pow(2).sum(); };
  remat::torch::executor plain(stages);
  stages[0].alternatives.push_back([s](const at::Tensor& x) { return at::tanh(s->forward(x)); });
  const remat::torch::profiled_chain p = remat::torch::profile(stages, torch::randn({5, 8}), loss);
  CHECK_THROWS_WITH_AS(plain.use_profile(p),
                       "stage 0: the profile lists 2 options, the stage has 1 (forward and its "
                       "alternatives)",
                       remat::torch::model_error);
}

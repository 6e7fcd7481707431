// Tests of remat/zoo.hpp: published FLOP counts, the sizes ZOO.md prescribes (ResNet and VGG
// tapes, DenseNet growth, Korthikanti's transformer tape), stage counts, the roofline, defaults
// and option errors; and the solvers on the networks.
#include <remat/zoo.hpp>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/optimal.hpp>
#include <remat/solvers/store_all.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace unit_zoo_test {

namespace {

namespace zoo = remat::zoo;
using remat::size_type;

zoo::network build(std::string_view model, size_type batch) {
  zoo::options o;
  o.batch = batch;
  return zoo::build(model, o);
}

std::size_t index_of(const zoo::network& n, const std::string& stage_name) {
  for (std::size_t k = 0; k < n.stage_names.size(); ++k)
    if (n.stage_names[k] == stage_name) return k;
  FAIL("no stage " << stage_name << " in " << n.name);
  return 0;
}

const remat::stage& stage_named(const zoo::network& n, const std::string& stage_name) {
  return n.chain.stages[index_of(n, stage_name)];
}

double relative_error(double value, double expected) {
  return std::fabs(value - expected) / expected;
}

struct gpt2_shape {
  const char* model;
  size_type layers, hidden, heads;
};
constexpr gpt2_shape gpt2_shapes[] = {{"gpt2-small", 12, 768, 12},
                                      {"gpt2-medium", 24, 1024, 16},
                                      {"gpt2-large", 36, 1280, 20},
                                      {"gpt2-xl", 48, 1600, 25}};

}  // namespace

TEST_CASE("every model is a valid chain, with one name and one FLOP count per stage") {
  for (const std::string_view model : zoo::model_names) {
    CAPTURE(model);
    const zoo::network n = build(model, 2);
    CHECK_NOTHROW(remat::validate(n.chain));
    REQUIRE(n.stage_names.size() == n.chain.stages.size());
    REQUIRE(n.stage_flops.size() == n.chain.stages.size());
    CHECK(std::set<std::string>(n.stage_names.begin(), n.stage_names.end()).size() ==
          n.stage_names.size());
    CHECK(n.total_flops ==
          doctest::Approx(std::accumulate(n.stage_flops.begin(), n.stage_flops.end(), 0.0)));
    CHECK(n.chain.input_size > 0);
    CHECK(n.chain.loss_time > 0);
    CHECK(n.chain.loss_overhead > 0);
    for (const remat::stage& s : n.chain.stages) {
      CHECK(s.output_size > 0);
      CHECK(s.output_size <= s.tape_size);
      CHECK(s.forward_time > 0);
      CHECK(s.backward_time >= s.forward_time);
      CHECK(s.backward_overhead > 0);
    }
  }
}

TEST_CASE("stage counts: one per block or layer, plus stem and head") {
  const std::pair<const char*, std::size_t> counts[] = {
      {"resnet50", 1 + 16 + 1},       {"resnet101", 1 + 33 + 1}, {"resnet152", 1 + 50 + 1},
      {"resnet1001", 1 + 333 + 1},    {"vgg16", 13 + 3},         {"vgg19", 16 + 3},
      {"densenet121", 1 + 58 + 3 + 1}};
  for (const auto& count : counts) {
    const std::string model = count.first;  // clang 14 cannot capture structured bindings
    CAPTURE(model);
    CHECK(build(model, 1).chain.stages.size() == count.second);
  }
  CHECK(build("resnet1001", 1).chain.stages.size() >= 333);
  for (const gpt2_shape& g : gpt2_shapes) {
    CAPTURE(g.model);
    const zoo::network n = build(g.model, 1);
    REQUIRE(n.chain.stages.size() == static_cast<std::size_t>(g.layers) + 2);
    CHECK(n.stage_names.front() == "embedding");
    CHECK(n.stage_names.back() == "lm_head");
  }
}

TEST_CASE("CNN totals match the published multiply-add counts per 224x224 image (5%)") {
  const std::pair<const char*, double> published[] = {
      {"resnet50", 4.1e9}, {"resnet101", 7.8e9}, {"resnet152", 11.5e9},
      {"vgg16", 15.5e9},   {"vgg19", 19.6e9},    {"densenet121", 2.87e9}};
  for (const auto& entry : published) {
    const std::string model = entry.first;
    const double macs = entry.second;
    CAPTURE(model);
    const zoo::network n = build(model, 1);
    CHECK(relative_error(n.total_flops / 2, macs) < 0.05);
    // Work is linear in the batch.
    CHECK(build(model, 8).total_flops == doctest::Approx(8 * n.total_flops));
  }
}

TEST_CASE("GPT-2 blocks: Korthikanti's tape, 2sbh outputs, 24bsh^2 + 4bs^2h FLOPs") {
  const size_type s = 1024;
  const size_type b = 2;
  for (const gpt2_shape& g : gpt2_shapes) {
    for (const zoo::dtype d : {zoo::dtype::bf16, zoo::dtype::fp16, zoo::dtype::fp32}) {
      CAPTURE(g.model);
      CAPTURE(zoo::name(d));
      zoo::options o;
      o.batch = b;
      o.sequence_length = s;
      o.dtype = d;
      const zoo::network n = zoo::build(g.model, o);
      const size_type h = g.hidden;
      const size_type a = g.heads;
      const size_type p = zoo::bytes_per_element(d);
      // 34sbh + 5as^2b for 16-bit activations; in general (16p + 2)sbh + (2p + 1)as^2b, the 2
      // and 1 being the one-byte dropout masks.
      const size_type tape = (16 * p + 2) * s * b * h + (2 * p + 1) * a * s * s * b;
      if (p == 2) CHECK(tape == 34 * s * b * h + 5 * a * s * s * b);
      const double flops = 24.0 * double(b * s * h * h) + 4.0 * double(b * s * s * h);
      for (std::size_t k = 1; k + 1 < n.chain.stages.size(); ++k) {
        const remat::stage& st = n.chain.stages[k];
        CHECK(n.stage_names[k] == "h." + std::to_string(k - 1));
        CHECK(st.tape_size == tape);
        CHECK(st.output_size == p * s * b * h);
        CHECK(relative_error(n.stage_flops[k], flops) < 0.05);
        // The input's gradient plus the largest intermediate's: the attention probabilities.
        CHECK(st.backward_overhead == p * s * b * h + p * a * s * s * b);
      }
      // The embedding reads int64 token ids; the LM head writes b x s x V logits.
      CHECK(n.chain.input_size == 8 * b * s);
      CHECK(n.chain.stages.front().output_size == p * s * b * h);
      CHECK(n.chain.stages.back().output_size == p * b * s * 50257);
      CHECK(relative_error(n.stage_flops.back(), 2.0 * double(b * s * h) * 50257) < 1e-9);
    }
  }
}

TEST_CASE("ResNet bottlenecks keep 3x their output on tape (in-place ReLU), more when projecting") {
  const size_type batch = 4;
  const zoo::network n = build("resnet50", batch);
  const remat::stage& identity = stage_named(n, "layer1.1");
  const size_type a = batch * 256 * 56 * 56 * 4;
  CHECK(identity.output_size == a);
  CHECK(identity.tape_size == 3 * a);
  // Backward: the input's gradient plus the largest intermediate's (the last conv's output).
  CHECK(identity.backward_overhead == 2 * a);
  // A no-recording forward holds the last conv's output beside the block's output.
  CHECK(identity.forward_overhead == a);
  const remat::stage& projecting = stage_named(n, "layer2.0");
  CHECK(projecting.output_size == batch * 512 * 28 * 28 * 4);
  CHECK(projecting.tape_size > 3 * projecting.output_size);
  CHECK(stage_named(n, "layer4.2").output_size == batch * 2048 * 7 * 7 * 4);
}

TEST_CASE("VGG conv stages keep the conv and ReLU outputs: tape 2a") {
  const size_type batch = 2;
  for (const char* model : {"vgg16", "vgg19"}) {
    CAPTURE(model);
    const zoo::network n = build(model, batch);
    const remat::stage& first = stage_named(n, "conv1_1");
    const size_type a = batch * 64 * 224 * 224 * 4;
    CHECK(first.output_size == a);
    CHECK(first.tape_size == 2 * a);
    const remat::stage& deep = stage_named(n, "conv4_2");
    CHECK(deep.output_size == batch * 512 * 28 * 28 * 4);
    CHECK(deep.tape_size == 2 * deep.output_size);
    // A stage ending with max pooling outputs a quarter of its conv's output.
    CHECK(stage_named(n, "conv1_2").output_size == a / 4);
    CHECK(stage_named(n, "fc8").output_size == 1000 * batch * 4);
  }
}

TEST_CASE("DenseNet-121: activations grow by 32 channels per layer within each dense block") {
  const size_type batch = 2;
  const zoo::network n = build("densenet121", batch);
  const size_type resolution[] = {56, 28, 14, 7};
  const int layers[] = {6, 12, 24, 16};
  for (int b = 0; b < 4; ++b) {
    const size_type step = 32 * resolution[b] * resolution[b] * batch * 4;
    const std::string block = "denseblock" + std::to_string(b + 1) + ".denselayer";
    for (int i = 2; i <= layers[b]; ++i) {
      CAPTURE(block + std::to_string(i));
      const remat::stage& prev = stage_named(n, block + std::to_string(i - 1));
      const remat::stage& cur = stage_named(n, block + std::to_string(i));
      CHECK(cur.output_size == prev.output_size + step);
      CHECK(cur.output_size <= cur.tape_size);
    }
    if (b < 3) {
      // Transitions halve the channels and the resolution: an eighth of the block's output.
      const remat::stage& last = stage_named(n, block + std::to_string(layers[b]));
      CHECK(stage_named(n, "transition" + std::to_string(b + 1)).output_size ==
            last.output_size / 8);
    }
  }
  CHECK(stage_named(n, "denseblock4.denselayer16").output_size == batch * 1024 * 7 * 7 * 4);
}

TEST_CASE("ResNet-1001: a 335-stage pre-activation chain on 32x32 images") {
  const zoo::network n = build("resnet1001", 1);
  CHECK(n.used.image_size == 32);
  CHECK(n.stage_names[1] == "group1.0");
  CHECK(n.stage_names[333] == "group3.110");
  const remat::stage& block = stage_named(n, "group2.50");
  CHECK(block.output_size == size_type{128} * 16 * 16 * 4);
  CHECK(block.tape_size == 3 * block.output_size);
  CHECK(stage_named(n, "group3.110").output_size == size_type{256} * 8 * 8 * 4);
}

TEST_CASE("the roofline: compute-bound time is FLOPs / peak, memory-bound time is bytes / bw") {
  zoo::options o;
  o.batch = 2;
  o.peak_flops = 100e12;
  o.bandwidth = 1e30;  // memory is free: only matrix products take time
  const zoo::network compute = zoo::build("gpt2-small", o);
  for (std::size_t k = 1; k + 1 < compute.chain.stages.size(); ++k) {
    const remat::stage& st = compute.chain.stages[k];
    CHECK(st.forward_time == doctest::Approx(1e3 * compute.stage_flops[k] / 100e12));
    CHECK(st.backward_time == doctest::Approx(2 * st.forward_time));
  }
  // With free compute, halving the bandwidth doubles every time.
  o.peak_flops = 1e30;
  o.bandwidth = 2e12;
  const zoo::network fast = zoo::build("resnet50", o);
  o.bandwidth = 1e12;
  const zoo::network slow = zoo::build("resnet50", o);
  for (std::size_t k = 0; k < fast.chain.stages.size(); ++k) {
    CHECK(slow.chain.stages[k].forward_time ==
          doctest::Approx(2 * fast.chain.stages[k].forward_time));
    CHECK(slow.chain.stages[k].backward_time ==
          doctest::Approx(2 * fast.chain.stages[k].backward_time));
  }
  CHECK(slow.chain.loss_time == doctest::Approx(2 * fast.chain.loss_time));
}

TEST_CASE("defaults: an A100, fp32 CNNs at 224x224 and batch 32, bf16 GPT-2 at 1024 x 8") {
  const zoo::network cnn = zoo::build("resnet101");
  CHECK(cnn.name == "resnet101-b32-224-fp32");
  CHECK(cnn.used.batch == 32);
  CHECK(cnn.used.image_size == 224);
  CHECK(cnn.used.sequence_length == 0);
  CHECK(cnn.used.dtype == zoo::dtype::fp32);
  CHECK(cnn.used.peak_flops == 19.5e12);
  CHECK(cnn.used.bandwidth == 2.0e12);
  CHECK(cnn.chain.input_size == size_type{32} * 3 * 224 * 224 * 4);
  const zoo::network gpt = zoo::build("gpt2-medium");
  CHECK(gpt.name == "gpt2-medium-b8-s1024-bf16");
  CHECK(gpt.used.sequence_length == 1024);
  CHECK(gpt.used.image_size == 0);
  CHECK(gpt.used.dtype == zoo::dtype::bf16);
  CHECK(gpt.used.peak_flops == 312e12);
  CHECK(gpt.description.find("gpt2-medium") != std::string::npos);
  CHECK(gpt.description.find("bf16") != std::string::npos);
  // fp16 on a CNN: half the bytes per element, the A100's tensor-core peak.
  zoo::options o;
  o.dtype = zoo::dtype::fp16;
  const zoo::network half = zoo::build("resnet101", o);
  CHECK(half.used.peak_flops == 312e12);
  CHECK(half.chain.input_size * 2 == cnn.chain.input_size);
  CHECK(half.chain.stages[5].output_size * 2 == cnn.chain.stages[5].output_size);
}

TEST_CASE("sizes are linear in the batch") {
  for (const std::string_view model : {"resnet152", "densenet121", "gpt2-large"}) {
    CAPTURE(model);
    const zoo::network one = build(model, 1);
    const zoo::network three = build(model, 3);
    CHECK(three.chain.input_size == 3 * one.chain.input_size);
    for (std::size_t k = 0; k < one.chain.stages.size(); ++k) {
      CHECK(three.chain.stages[k].output_size == 3 * one.chain.stages[k].output_size);
      CHECK(three.chain.stages[k].tape_size == 3 * one.chain.stages[k].tape_size);
    }
  }
}

TEST_CASE("operator granularity: the same work, one stage per op; GPT-2 at any depth") {
  zoo::options o;
  o.sequence_length = 256;
  o.batch = 2;
  const zoo::network blocks = zoo::build("gpt2-small", o);
  o.operators = true;
  const zoo::network ops = zoo::build("gpt2-small", o);
  CHECK(ops.chain.length() == 12 * 19 + 2 + 2);
  CHECK(ops.name == "gpt2-small-b2-s256-bf16-ops");
  CHECK(ops.stage_names[2] == "h.0.0.norm");
  CHECK(relative_error(ops.total_flops, blocks.total_flops) < 1e-12);
  auto forward = [](const remat::chain& c) {
    double t = 0;
    for (const remat::stage& s : c.stages) t += s.forward_time;
    return t;
  };
  CHECK(relative_error(forward(ops.chain), forward(blocks.chain)) < 1e-12);
  CHECK(ops.chain.input_size == blocks.chain.input_size);
  CHECK(ops.chain.loss_time == blocks.chain.loss_time);
  // The op stages of a block end with the block's output.
  CHECK(ops.chain.stages[2 + 19 - 1].output_size == blocks.chain.stages[1].output_size);
  // The residual input crosses the attention half: it is in every activation there.
  for (std::size_t k = 2; k < 2 + 12; ++k)
    CHECK(ops.chain.stages[k].output_size > blocks.chain.stages[0].output_size);
  // CNNs too.
  zoo::options cnn;
  cnn.operators = true;
  const zoo::network resnet = zoo::build("resnet50", cnn);
  CHECK(resnet.chain.length() > 3 * zoo::build("resnet50").chain.length());

  zoo::options deep;
  deep.layers = 263;
  deep.operators = true;
  const zoo::network long_chain = zoo::build("gpt2-medium", deep);
  CHECK(long_chain.chain.length() == 263 * 19 + 4);
  CHECK(long_chain.name == "gpt2-medium-L263-b8-s1024-bf16-ops");
  deep.operators = false;
  deep.layers = 3;
  CHECK(zoo::build("gpt2-xl", deep).chain.length() == 5);
  deep.layers = 0;
  CHECK_THROWS_WITH_AS(zoo::build("gpt2-xl", deep), "layers must be between 1 and 100000 (got 0)",
                       zoo::zoo_error);
  deep.layers = 4;
  CHECK_THROWS_WITH_AS(zoo::build("vgg16", deep),
                       "vgg16 is a CNN: its depth is fixed (--layers is for GPT-2)",
                       zoo::zoo_error);
}

TEST_CASE("bad requests are zoo_errors that say what is wrong") {
  auto message = [](std::string_view model, const zoo::options& o) -> std::string {
    try {
      zoo::build(model, o);
    } catch (const zoo::zoo_error& e) {
      return e.what();
    }
    return "";
  };
  zoo::options none;
  CHECK(message("resnet18", none).find("unknown model \"resnet18\"") != std::string::npos);
  CHECK(message("resnet18", none).find("gpt2-xl") != std::string::npos);
  zoo::options o;
  o.image_size = 224;
  CHECK(message("gpt2-small", o).find("sequence length") != std::string::npos);
  o = {};
  o.sequence_length = 128;
  CHECK(message("vgg16", o).find("image size") != std::string::npos);
  o = {};
  o.batch = 0;
  CHECK(message("vgg16", o) == "batch must be >= 1 (got 0)");
  o = {};
  o.image_size = 31;
  CHECK(message("densenet121", o) == "image size must be >= 32 (got 31)");
  o = {};
  o.sequence_length = 0;
  CHECK(message("gpt2-small", o) == "sequence length must be >= 1 (got 0)");
  o = {};
  o.peak_flops = 0;
  CHECK(message("resnet50", o).find("peak") != std::string::npos);
  o = {};
  o.bandwidth = std::numeric_limits<double>::quiet_NaN();
  CHECK(message("resnet50", o).find("bandwidth") != std::string::npos);
  o = {};
  o.batch = size_type{1} << 40;
  CHECK(message("gpt2-xl", o).find("exceed 2^62") != std::string::npos);
}

TEST_CASE("zoo chains solve: store-all is the sum of the times, recomputation fits in less") {
  const zoo::network n = zoo::build("resnet50");
  double total = n.chain.loss_time;
  for (const remat::stage& s : n.chain.stages) total += s.forward_time + s.backward_time;
  const remat::solve_result all =
      remat::solve(n.chain, remat::max_size, {.solver = remat::solver::store_all});
  REQUIRE(all.feasible);
  CHECK(all.schedule.makespan == doctest::Approx(total));
  const size_type half = all.min_feasible_budget / 2;
  const remat::solve_result r = remat::solve(n.chain, half);
  REQUIRE(r.feasible);
  CHECK(r.schedule.peak_memory <= half);
  CHECK(r.schedule.makespan > all.schedule.makespan);
  CHECK(r.schedule.makespan < 1.5 * all.schedule.makespan);
}

// The zoo's networks, where the solve at one budget weighs the search against the frontier DP on
// real sizes: the whole curve's
// value and least budget at 20% to 70% of store-all, and a schedule that replays within the
// budget at that makespan. Not resnet1001: its whole curve takes about 30 s.
TEST_CASE("zoo: the solve at one budget, searched or not, has the whole curve's value") {
  constexpr remat::solve_options exact{.slots = remat::exact_units};
  for (const std::string_view name : zoo::model_names) {
    if (name == "resnet1001") continue;
    const remat::chain c = zoo::build(name).chain;
    const size_type all = remat::solve_store_all(c, remat::max_size).min_feasible_budget;
    const remat::detail::whole_frontier whole =
        remat::detail::make_whole_frontier(c, exact, remat::solver::optimal);
    for (const size_type percent : {20, 30, 40, 50, 60, 70}) {
      const size_type budget = all / 100 * percent;
      CAPTURE(name);
      CAPTURE(percent);
      const remat::solve_result one = remat::solve_optimal(c, budget, exact);
      const remat::solve_result w =
          remat::detail::whole_frontier_at(c, whole, budget, remat::solver::optimal);
      CHECK(one.exact);
      CHECK(one.feasible == w.feasible);
      CHECK(one.min_feasible_budget == w.min_feasible_budget);
      if (!one.feasible) continue;
      CHECK(one.schedule.makespan == w.schedule.makespan);
      const remat::replay_result sim = remat::simulate(c, one.schedule.ops);
      CHECK(sim.valid());
      CHECK(sim.peak_memory <= budget);
      CHECK(sim.makespan == doctest::Approx(one.schedule.makespan));
    }
  }
}

}  // namespace unit_zoo_test

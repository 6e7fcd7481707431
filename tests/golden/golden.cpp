// Golden outputs: what every solver returns on the bundled chains, zoo chains and random chains
// at a ladder of budgets, the memory plan of each schedule, and the replay of random op
// sequences (valid ones, with and without transfers, and invalid ones), each reduced to one line
// of text: feasibility, predicted figures, a hash of the ops, the plan's arena and a hash of its
// offsets and waits, the replay's error, peaks and times. The lines are compared with
// tests/data/golden/*.txt, written by an earlier build: a refactoring that changes any schedule,
// plan or replay, op for op or byte for byte, fails here and says which line.
//
// REMAT_GOLDEN_WRITE=1 rewrites the files instead (then `git diff` shows what changed).
#include <remat/io/chain_json.hpp>
#include <remat/memory_plan.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"
#include "random_schedule.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace golden_test {

using namespace remat;

struct fnv {
  std::uint64_t h = 1469598103934665603ULL;
  void add(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ULL;
    }
  }
  void add(double d) {
    std::uint64_t bits = 0;
    static_assert(sizeof bits == sizeof d);
    __builtin_memcpy(&bits, &d, sizeof d);
    add(bits);
  }
  void add(const op& o) {
    add(static_cast<std::uint64_t>(o.kind));
    add(static_cast<std::uint64_t>(static_cast<std::uint32_t>(o.stage)));
    add(static_cast<std::uint64_t>(o.tensor));
  }
};

std::string hex(std::uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string exact(double d) {
  char b[40];
  std::snprintf(b, sizeof b, "%a", d);
  return b;
}

std::string ops_hash(std::span<const op> ops) {
  fnv f;
  for (const op& o : ops) f.add(o);
  return hex(f.h) + "/" + std::to_string(ops.size());
}

// The plan's arena, host pool, method, and a hash of every buffer and wait.
std::string plan_line(const chain& c, std::span<const op> ops) {
  memory_plan m;
  try {
    memory_plan_options o;
    o.alignment = 64;
    m = make_memory_plan(c, ops, o);
  } catch (const std::exception& e) {
    return std::string("plan-error ") + e.what();
  }
  fnv f;
  for (const buffer& b : m.buffers) {
    f.add(static_cast<std::uint64_t>(b.kind));
    f.add(static_cast<std::uint64_t>(static_cast<std::uint32_t>(b.index)));
    f.add(static_cast<std::uint64_t>(b.first_op));
    f.add(static_cast<std::uint64_t>(b.last_op));
    f.add(static_cast<std::uint64_t>(b.size));
    f.add(static_cast<std::uint64_t>(b.offset));
    f.add(static_cast<std::uint64_t>(b.on_host));
    f.add(static_cast<std::uint64_t>(b.last_read));
  }
  for (const step& s : m.steps)
    for (const std::uint64_t v :
         {std::uint64_t{s.input}, std::uint64_t{s.output}, std::uint64_t{s.tape},
          std::uint64_t{s.gradient}, std::uint64_t{s.workspace},
          static_cast<std::uint64_t>(s.input_size), static_cast<std::uint64_t>(s.output_size)})
      f.add(v);
  for (const wait& w : m.waits) {
    f.add(static_cast<std::uint64_t>(w.before));
    f.add(static_cast<std::uint64_t>(w.after));
    f.add(static_cast<std::uint64_t>(w.why));
  }
  return "arena " + std::to_string(m.arena_bytes) + " host " + std::to_string(m.host_bytes) +
         " lb " + std::to_string(m.lower_bound) + " " + std::string(m.method) + " " + hex(f.h);
}

std::string replay_line(const chain& c, std::span<const op> ops) {
  const replay_result r = simulate(c, ops);
  fnv f;
  for (const size_type v : r.memory_after) f.add(static_cast<std::uint64_t>(v));
  for (const size_type v : r.op_peak) f.add(static_cast<std::uint64_t>(v));
  for (const double v : r.start) f.add(v);
  for (const double v : r.end) f.add(v);
  std::string line = "error " + std::to_string(static_cast<int>(r.error)) + " at " +
                     (r.first_invalid == replay_result::npos ? std::string("-")
                                                             : std::to_string(r.first_invalid)) +
                     " " + std::string(1, r.tensor.kind) + std::to_string(r.tensor.index) +
                     " makespan " + exact(r.makespan) + " peak " + std::to_string(r.peak_memory) +
                     " " + hex(f.h) + " msg " + describe(r, ops);
  if (r.valid()) line += " | " + plan_line(c, ops);
  return line;
}

struct named_chain {
  std::string name;
  chain c;
};

std::vector<named_chain> bundled_and_zoo() {
  std::vector<named_chain> out;
  for (const char* file :
       {"examples/chains/resnet18-rockmate.json", "examples/chains/resnet101-b32-224-fp32.json",
        "examples/chains/gpt2-medium-b4-s1024-bf16.json", "tests/data/chains/tiny-mlp.json"})
    out.push_back({file, io::read_chain_file(std::string(REMAT_SOURCE_DIR) + "/" + file).chain});
  auto zoo = [&](const char* model, size_type batch, int layers = 0) {
    zoo::options o;
    o.batch = batch;
    if (layers > 0) {
      o.sequence_length = 256;
      o.layers = layers;
    }
    out.push_back({std::string("zoo:") + model, zoo::build(model, o).chain});
  };
  zoo("resnet50", 8);
  zoo("densenet121", 4);
  zoo("vgg16", 4);
  zoo("gpt2-small", 2, 6);
  // The same chains with a link to host memory (PCIe 4: 25 GB/s each way, bytes per ms).
  const std::size_t plain = out.size();
  for (std::size_t i = 0; i < plain; ++i) {
    if (out[i].name.find("tiny") != std::string::npos) continue;
    named_chain l = out[i];
    l.name += "+link";
    l.c.transfer = {25e6, 25e6};
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<named_chain> random_chains() {
  std::vector<named_chain> out;
  std::mt19937_64 rng(20261206);
  for (int i = 0; i < 24; ++i) {  // byte-sized, 5 to 25 stages
    testing::random_chain_options o;
    o.min_stages = 5;
    o.max_stages = 25;
    o.max_size = 1'000'000;
    chain c = testing::random_chain(rng, o);
    if (i % 2 == 1) c.transfer = {5e4, 4e4};
    out.push_back({"random-" + std::to_string(i), std::move(c)});
  }
  for (int i = 0; i < 24; ++i) {  // tiny, where the exhaustive search runs
    testing::random_chain_options o;
    o.max_stages = 4;
    chain c = testing::random_chain(rng, o);
    if (i % 2 == 1) c.transfer = {2.5, 2};
    out.push_back({"tiny-" + std::to_string(i), std::move(c)});
  }
  return out;
}

std::string solve_line(const chain& c, size_type budget, const solve_options& o) {
  solve_result r;
  try {
    r = solve(c, budget, o);
  } catch (const solver_error& e) {
    return std::string("refused ") + e.what();
  }
  std::string line =
      "feasible " + std::to_string(r.feasible) + " min " + std::to_string(r.min_feasible_budget) +
      " unit " + std::to_string(r.unit) + " exact " + std::to_string(r.exact) + " makespan " +
      exact(r.schedule.makespan) + " peak " + std::to_string(r.schedule.peak_memory) + " ops " +
      ops_hash(r.schedule.ops) + " loss " + exact(r.memory_loss) + " " + exact(r.makespan_loss);
  if (r.feasible) line += " | " + plan_line(c, r.schedule.ops);
  return line;
}

void solve_lines(const named_chain& nc, std::vector<std::string>& out) {
  const chain& c = nc.c;
  solve_options store_all, min_memory;
  store_all.solver = solver::store_all;
  min_memory.solver = solver::min_memory;
  const size_type all = solve(c, 0, store_all).min_feasible_budget;
  const size_type least = solve(c, 0, min_memory).min_feasible_budget;
  std::vector<size_type> budgets{least};
  for (const int pct : {5, 15, 30, 50, 75})
    budgets.push_back(least + (all - least) * pct / 100);
  budgets.push_back(all);
  budgets.push_back(least > 0 ? least - 1 : 0);
  const bool link = c.transfer.offload_bandwidth > 0 && c.transfer.prefetch_bandwidth > 0;
  for (const solver s : all_solvers) {
    if (s == solver::exhaustive && c.length() > (link ? 1u : 5u)) continue;
    if (needs_link(s) && !link) continue;
    solve_options base;
    base.solver = s;
    std::vector<solve_options> variants{base};
    if (s == solver::optimal || s == solver::checkpoint_only)
      for (const size_type slots : {exact_units, rotor_slots}) {
        variants.push_back(base);
        variants.back().slots = slots;
      }
    if (s == solver::optimal && c.length() > 8) {
      variants.push_back(base);
      variants.back().coarsen = c.length() / 2;
    }
    for (const solve_options& o : variants)
      for (const size_type b : budgets)
        out.push_back(nc.name + " " + std::string(name(s)) + " slots " + std::to_string(o.slots) +
                      " coarsen " + std::to_string(o.coarsen) + " budget " + std::to_string(b) +
                      ": " + solve_line(c, b, o));
  }
}

// Random op sequences: valid walks (with transfers where the chain has a link), and each walk
// with one op changed (mostly invalid).
void replay_lines(const named_chain& nc, std::mt19937_64& rng, std::vector<std::string>& out) {
  const bool link = nc.c.transfer.offload_bandwidth > 0;
  for (int w = 0; w < 4; ++w) {
    auto ops = testing::random_schedule(nc.c, rng, 400, 4, link && w % 2 == 1);
    if (!ops) continue;
    out.push_back(nc.name + " walk " + std::to_string(w) + " " + ops_hash(*ops) + ": " +
                  replay_line(nc.c, *ops));
    std::vector<op> bad = *ops;
    const auto at = std::uniform_int_distribution<std::size_t>(0, bad.size() - 1)(rng);
    const auto kind = std::uniform_int_distribution<int>(0, link ? 7 : 4)(rng);
    bad[at].kind = static_cast<op_kind>(kind);
    bad[at].stage += std::uniform_int_distribution<int>(-1, 1)(rng);
    out.push_back(nc.name + " mutated " + std::to_string(w) + " " + ops_hash(bad) + ": " +
                  replay_line(nc.c, bad));
  }
}

void compare_or_write(const std::string& file, const std::vector<std::string>& lines) {
  const std::string path = std::string(REMAT_SOURCE_DIR) + "/tests/data/golden/" + file;
  if (const char* w = std::getenv("REMAT_GOLDEN_WRITE"); w != nullptr && *w != '\0') {
    std::ofstream out(path);
    for (const std::string& l : lines) out << l << '\n';
    MESSAGE("wrote " << lines.size() << " lines to " << path);
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::vector<std::string> stored;
  for (std::string l; std::getline(in, l);) stored.push_back(l);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < std::max(stored.size(), lines.size()); ++i) {
    const std::string a = i < stored.size() ? stored[i] : "(none)";
    const std::string b = i < lines.size() ? lines[i] : "(none)";
    if (a == b) continue;
    if (++differ <= 5) FAIL_CHECK("line " << i + 1 << " of " << file << "\n  stored: " << a << "\n  now:    " << b);
  }
  CHECK_MESSAGE(differ == 0, differ << " of " << lines.size() << " lines differ from " << file);
}

TEST_CASE("every solver's schedules and plans on bundled, zoo and random chains are the stored ones") {
  std::vector<std::string> lines;
  for (const named_chain& nc : bundled_and_zoo()) solve_lines(nc, lines);
  for (const named_chain& nc : random_chains()) solve_lines(nc, lines);
  compare_or_write("schedules.txt", lines);
}

TEST_CASE("replays and plans of random op sequences are the stored ones") {
  std::vector<std::string> lines;
  std::mt19937_64 rng(7);
  for (const named_chain& nc : random_chains()) replay_lines(nc, rng, lines);
  compare_or_write("replays.txt", lines);
}

}  // namespace golden_test

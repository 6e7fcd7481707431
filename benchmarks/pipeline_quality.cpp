// Pipelines (remat/pipeline.hpp): the slowest rank's time per micro-batch, and what fits per
// rank, for three ways to run the zoo's chains on P ranks with M = 2P micro-batches:
//
//   (a) equal stages per rank, every stage checkpointed (torch.utils.checkpoint around every
//       block, what torchtitan's and Megatron's full recomputation do), the same on every rank;
//   (b) equal stages per rank, each rank solved by remat with its own K;
//   (c) remat's split (split_pipeline): the stages and each rank's schedule, its own K.
//
// Budgets per rank are multiples of B_a, the most memory a rank of (a) needs (its peak plus
// K - 1 micro-batches' retained memory, K the rank's micro-batches in flight): at B_a (a) just
// fits. Then, in B_a, the largest micro-batch each way fits (the zoo's chain rebuilt at each
// batch size; up to 16 times the default). Every schedule is replayed by the simulator on its rank's
// chain (the library does; this program checks the budget again).
//
// Run: bash benchmarks/run.sh pipeline_quality (results: benchmarks/results/pipeline_quality.txt).
#include <remat/pipeline.hpp>
#include <remat/zoo.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using remat::pipeline_result;
using remat::size_type;

struct setup {
  const char* network;
  std::size_t ranks;
  remat::pipeline_schedule schedule;
};

double gib(size_type v) { return static_cast<double>(v) / (1024.0 * 1024 * 1024); }

void check(const remat::chain& c, const pipeline_result& p, const char* what) {
  if (!p.feasible) return;
  for (const remat::pipeline_stage& s : p.stages) {
    const remat::replay_result r =
        remat::simulate(remat::stage_chain(c, s.first, s.end), s.result.schedule);
    if (!r.valid() ||
        r.peak_memory + static_cast<size_type>(s.in_flight - 1) * r.retained > p.budget) {
      std::fprintf(stderr, "%s: a rank's schedule does not keep its budget\n", what);
      std::exit(1);
    }
  }
}

std::string sizes(const pipeline_result& p) {
  std::string out;
  for (const remat::pipeline_stage& s : p.stages) {
    if (!out.empty()) out += '+';
    out += std::to_string(s.end - s.first);
  }
  return out;
}

std::string time_text(const pipeline_result& p) {
  if (!p.feasible) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", p.slowest);
  return buf;
}

// The most memory any rank of `p` holds, over the budget.
double fullest(const pipeline_result& p) {
  size_type most = 0;
  for (const remat::pipeline_stage& s : p.stages) most = std::max(most, s.memory());
  return static_cast<double>(most) / static_cast<double>(p.budget);
}

struct three {
  pipeline_result a, b, c;
  double seconds = 0;
};

three run_three(const remat::chain& c, size_type budget, const std::vector<std::size_t>& K) {
  const std::vector<std::size_t> equal = remat::equal_starts(c.length(), K.size());
  three t;
  t.a = remat::checkpoint_every_stage(c, budget, K, equal);
  t.b = remat::solve_pipeline(c, budget, K, equal);
  const auto start = std::chrono::steady_clock::now();
  t.c = remat::split_pipeline(c, budget, K);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(c, t.b, "(b)");
  check(c, t.c, "(c)");
  return t;
}

size_type budget_of_a(const remat::chain& c, const std::vector<std::size_t>& K) {
  return remat::checkpoint_every_stage(c, 0, K, remat::equal_starts(c.length(), K.size()))
      .min_feasible_budget;
}

remat::chain at_batch(const char* network, size_type batch) {
  remat::zoo::options o;
  o.batch = batch;
  return remat::zoo::build(network, o).chain;
}

// The largest batch in 1 .. 16 x the default at which `fits(chain)` holds (feasibility grows
// with memory, so with smaller batches): a binary search.
template <class Fits>
size_type largest_batch(const char* network, size_type from, Fits&& fits) {
  size_type lo = 0, hi = 16 * from;
  while (lo < hi) {
    const size_type mid = (lo + hi + 1) / 2;
    if (fits(at_batch(network, mid)))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

void tables(const std::vector<setup>& setups) {
  std::printf("## The slowest rank's time per micro-batch (ms), by budget per rank\n\n");
  std::printf("B_a: what (a) needs per rank. (a) every stage checkpointed, equal split; (b) remat "
              "per rank, equal split; (c) remat's split. 'fullest': the most any rank of (c) "
              "holds over the budget.\n\n");
  std::printf("| chain | L | P | schedule | K | budget | GiB | (a) | (b) | (c) | (a)/(c) | "
              "(c) split | fullest | solves | (c) s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const setup& s : setups) {
    const remat::chain c = remat::zoo::build(s.network).chain;
    const auto K = remat::micro_batches_in_flight(s.schedule, s.ranks, 2 * s.ranks);
    std::string ks;
    for (const std::size_t k : K) {
      if (!ks.empty()) ks += ',';
      ks += std::to_string(k);
    }
    const size_type Ba = budget_of_a(c, K);
    const size_type least_c = remat::split_pipeline(c, 0, K).min_feasible_budget;
    std::vector<std::pair<std::string, size_type>> budgets = {
        {"least (c)", least_c},
        {"0.75 B_a", Ba / 4 * 3},
        {"B_a", Ba},
        {"1.5 B_a", Ba / 2 * 3}};
    for (const auto& [label, budget] : budgets) {
      const three t = run_three(c, budget, K);
      char ratio[32] = "-";
      if (t.a.feasible && t.c.feasible)
        std::snprintf(ratio, sizeof ratio, "%.2f", t.a.slowest / t.c.slowest);
      std::printf("| %s | %zu | %zu | %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %.2f | %zu | "
                  "%.3f |\n",
                  s.network, c.length(), s.ranks, std::string(remat::name(s.schedule)).c_str(),
                  ks.c_str(), label.c_str(), gib(budget), time_text(t.a).c_str(),
                  time_text(t.b).c_str(), time_text(t.c).c_str(), ratio,
                  t.c.feasible ? sizes(t.c).c_str() : "-", t.c.feasible ? fullest(t.c) : 0.0,
                  t.c.solves, t.seconds);
    }
  }
}

// The largest batch that fits with `way`, as a table cell.
template <class Way>
std::string batch_cell(const char* network, size_type from, Way&& way) {
  return std::to_string(
      largest_batch(network, from, [&](const remat::chain& c) { return way(c).feasible; }));
}

void batches(const std::vector<setup>& setups) {
  std::printf("\n## The largest micro-batch that fits in B_a per rank (B_a at the default "
              "batch)\n\n");
  std::printf("| chain | P | schedule | default batch | B_a GiB | (a) | (b) | (c) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const setup& s : setups) {
    const remat::zoo::network n = remat::zoo::build(s.network);
    const size_type batch = n.used.batch;
    const auto K = remat::micro_batches_in_flight(s.schedule, s.ranks, 2 * s.ranks);
    const size_type Ba = budget_of_a(n.chain, K);
    auto equal = [&](const remat::chain& c) { return remat::equal_starts(c.length(), K.size()); };
    const std::string a = batch_cell(s.network, batch, [&](const remat::chain& c) {
      return remat::checkpoint_every_stage(c, Ba, K, equal(c));
    });
    const std::string b = batch_cell(s.network, batch, [&](const remat::chain& c) {
      return remat::solve_pipeline(c, Ba, K, equal(c));
    });
    const std::string c = batch_cell(s.network, batch, [&](const remat::chain& ch) {
      return remat::split_pipeline(ch, Ba, K);
    });
    std::printf("| %s | %zu | %s | %lld | %.2f | %s | %s | %s |\n", s.network, s.ranks,
                std::string(remat::name(s.schedule)).c_str(), static_cast<long long>(batch),
                gib(Ba), a.c_str(), b.c_str(), c.c_str());
  }
}

}  // namespace

int main() {
  using remat::pipeline_schedule;
  const std::vector<setup> setups = {
      {"gpt2-small", 4, pipeline_schedule::one_f_one_b},
      {"gpt2-small", 8, pipeline_schedule::one_f_one_b},
      {"gpt2-medium", 4, pipeline_schedule::one_f_one_b},
      {"gpt2-medium", 8, pipeline_schedule::one_f_one_b},
      {"resnet50", 4, pipeline_schedule::one_f_one_b},
      {"resnet152", 4, pipeline_schedule::one_f_one_b},
      {"resnet152", 8, pipeline_schedule::one_f_one_b},
      {"gpt2-medium", 4, pipeline_schedule::gpipe},
      {"resnet152", 4, pipeline_schedule::gpipe},
  };
  tables(setups);
  batches(setups);
}

// Coarsening: what solving blocks instead of stages costs, and how long chains solve.
//
// Part 1, quality: zoo chains at operator granularity of 99 to 289 stages (where the fine DP
// runs), at 30%, 50% and 70% of store-all's peak. For each, the optimal solver (default solve) on
// the fine chain, then on the chain coarsened to L/2, L/4 and L/8 blocks with least-loss and with
// evenly spaced cuts (solve_options::coarsen), each schedule replayed on the fine chain. Printed:
// the makespan over the fine DP's (1.000: nothing lost), and the fine DP's over store-all's.
//
// Part 2, speed: GPT-2 medium at 263 layers, one stage per operator (5001 stages), solved end to
// end (coarsening, the DP, expansion and the replay on the fine chain) with 100 and 200 blocks
// and with automatic coarsening, one thread, at the same budgets.
//
// Run: build/release/benchmarks/bench_coarsen_quality (results: benchmarks/README.md).
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include "store_all.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct timed {
  remat::solve_result result;
  double seconds = 0;
};

timed run(const remat::chain& c, remat::size_type budget, const remat::solve_options& o) {
  const auto start = std::chrono::steady_clock::now();
  timed t;
  t.result = remat::solve(c, budget, o);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // solve replays every schedule itself; this is the benchmark's own check of the claim.
  if (t.result.feasible && !remat::simulate(c, t.result.schedule).fits(budget)) {
    std::fprintf(stderr, "a schedule does not fit its budget\n");
    std::exit(1);
  }
  return t;
}

std::string ratio(const timed& t, double reference) {
  if (!t.result.feasible) return "  -  ";
  char text[16];
  std::snprintf(text, sizeof text, "%.3f", t.result.schedule.makespan / reference);
  return text;
}

remat::zoo::network gpt2_ops(const char* model, int layers) {
  remat::zoo::options o;
  o.layers = layers;
  o.operators = true;
  return remat::zoo::build(model, o);
}

}  // namespace

int main() {
  const double fractions[] = {0.3, 0.5, 0.7};

  std::vector<remat::zoo::network> chains = {gpt2_ops("gpt2-small", 5), gpt2_ops("gpt2-small", 10),
                                             gpt2_ops("gpt2-small", 15)};
  remat::zoo::options resnet;
  resnet.operators = true;
  chains.push_back(remat::zoo::build("resnet50", resnet));

  std::printf("## Quality: coarsen-then-solve over the fine DP (optimal, default solve)\n\n");
  std::printf("| chain | L | budget | fine DP / store-all | fine DP s | K | least-loss | even |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const remat::zoo::network& n : chains) {
    const remat::chain& c = n.chain;
    const std::size_t L = c.length();
    const auto peak = static_cast<double>(bench::store_all_peak(c));
    for (const double f : fractions) {
      const auto budget = static_cast<remat::size_type>(f * peak);
      const timed fine = run(c, budget, {});
      for (const std::size_t K : {L / 2, L / 4, L / 8}) {
        const timed least = run(c, budget, {.coarsen = K});
        const timed even =
            run(c, budget, {.coarsen = K, .coarse_boundaries = remat::boundary_rule::even});
        const double reference = fine.result.feasible ? fine.result.schedule.makespan : 0;
        std::printf("| %s | %zu | %.0f%% | %s | %.2f | %zu | %s | %s |\n", n.name.c_str(), L,
                    100 * f, ratio(fine, bench::store_all_time(c)).c_str(), fine.seconds, K,
                    fine.result.feasible ? ratio(least, reference).c_str() : "(fine infeasible)",
                    fine.result.feasible ? ratio(even, reference).c_str() : "(fine infeasible)");
      }
    }
  }

  const remat::zoo::network big = gpt2_ops("gpt2-medium", 263);
  const remat::chain& c = big.chain;
  const auto peak = static_cast<double>(bench::store_all_peak(c));
  std::printf("\n## Speed: %s, %zu stages, end to end, one thread\n\n", big.name.c_str(),
              c.length());
  std::printf(
      "| budget | coarsen | blocks | largest block | seconds | of which cutting | makespan / "
      "store-all |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const double f : fractions) {
    const auto budget = static_cast<remat::size_type>(f * peak);
    for (const std::size_t K : {std::size_t{100}, std::size_t{200}, remat::auto_coarsening}) {
      if (K == remat::auto_coarsening && f != 0.5) continue;  // ~30 s each: one budget
      const timed t = run(c, budget, {.coarsen = K});
      // The boundary DP alone, for the block count the solve used.
      const auto start = std::chrono::steady_clock::now();
      (void)remat::coarsen(c, t.result.coarse_length);
      const double cutting =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("| %.0f%% | %s | %zu | %zu | %.2f | %.2f | %s |\n", 100 * f,
                  K == remat::auto_coarsening ? "auto" : std::to_string(K).c_str(),
                  t.result.coarse_length, t.result.largest_block, t.seconds, cutting,
                  ratio(t, bench::store_all_time(c)).c_str());
    }
  }
  return 0;
}

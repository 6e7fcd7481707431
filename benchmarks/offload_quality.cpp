// Offloading: what a link to host memory buys, per solver, on the zoo's chains.
//
// For each chain and link (PCIe 4.0: 25 GB/s each way; PCIe 5.0: 47 GB/s device to host and
// 55 GB/s host to device; NVLink-C2C: 400 GB/s) and each budget (10%, 20%, 30% and 50% of
// store-all's peak): the makespan over store-all's of recompute-only (`optimal`), `offload`, and
// the offloading baselines (save-on-cpu, vdnn, sequential-offload), "-" where the solver finds no
// schedule; then each solver's least feasible budget (exact sizes) as a share of store-all's
// peak, and the seconds the offload solve took at each budget (one thread, default options, the
// baselines included). Every schedule is replayed by the simulator (remat::solve does; this
// program checks it again).
//
// Run: bash benchmarks/run.sh offload_quality (results: benchmarks/results/offload_quality.txt).
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include "store_all.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct host_link {
  const char* name;
  double out, in;  // bytes per ms
};

remat::solve_result checked(const remat::chain& c, remat::size_type budget, remat::solver s,
                            double* seconds = nullptr, remat::size_type slots = remat::auto_slots) {
  const auto start = std::chrono::steady_clock::now();
  remat::solve_result r = remat::solve(c, budget, {.solver = s, .slots = slots});
  if (seconds != nullptr)
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.feasible && !remat::simulate(c, r.schedule).fits(budget)) {
    std::fprintf(stderr, "%s: a schedule does not fit its budget\n", std::string(name(s)).c_str());
    std::exit(1);
  }
  return r;
}

}  // namespace

int main() {
  const double fractions[] = {0.1, 0.2, 0.3, 0.5};
  const host_link links[] = {{"PCIe 4", 25e6, 25e6}, {"PCIe 5", 47e6, 55e6}, {"C2C", 400e6, 400e6}};
  const remat::solver solvers[] = {remat::solver::optimal, remat::solver::offload,
                                   remat::solver::save_on_cpu, remat::solver::vdnn,
                                   remat::solver::sequential_offload};
  const char* models[] = {"resnet50", "resnet101", "vgg16", "densenet121", "gpt2-small",
                          "gpt2-medium"};

  std::printf("## Makespan over store-all's, by budget (share of store-all's peak)\n\n");
  std::printf("| chain | L | link | budget | optimal | offload | save-on-cpu | vdnn | "
              "sequential-offload | offload s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::string least_rows;
  for (const char* model : models) {
    remat::chain c = remat::zoo::build(model, {}).chain;
    const auto peak = static_cast<double>(bench::store_all_peak(c));
    const double reference = bench::store_all_time(c);
    for (const host_link& l : links) {
      c.transfer = {l.out, l.in};
      for (const double f : fractions) {
        const auto budget = static_cast<remat::size_type>(f * peak);
        std::printf("| %s | %zu | %s | %.0f%% |", model, c.length(), l.name, 100 * f);
        double seconds = 0;
        for (const remat::solver s : solvers) {
          const remat::solve_result r =
              checked(c, budget, s, s == remat::solver::offload ? &seconds : nullptr);
          if (r.feasible)
            std::printf(" %.3f |", r.schedule.makespan / reference);
          else
            std::printf(" - |");
        }
        std::printf(" %.3f |\n", seconds);
      }
      char row[256];
      int n = std::snprintf(row, sizeof row, "| %s | %s |", model, l.name);
      for (const remat::solver s : solvers) {
        // Least budgets on exact sizes (offload reports its DP's only there).
        const auto least = checked(c, 0, s, nullptr, remat::exact_units).min_feasible_budget;
        n += std::snprintf(row + n, sizeof row - static_cast<std::size_t>(n), " %.1f%% |",
                           100 * static_cast<double>(least) / peak);
      }
      least_rows += std::string(row) + "\n";
    }
  }
  std::printf("\n## Least feasible budget (share of store-all's peak)\n\n");
  std::printf("| chain | link | optimal | offload | save-on-cpu | vdnn | sequential-offload |\n");
  std::printf("|---|---|---|---|---|---|---|\n%s", least_rows.c_str());
  return 0;
}

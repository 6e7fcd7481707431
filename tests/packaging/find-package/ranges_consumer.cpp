// An installed remat::ranges: a chain from columns, coarsened, solved, expanded lazily.
#include <remat/ranges.hpp>
#include <remat/solve.hpp>

#include <vector>

int main() {
  const std::vector<double> fw(40, 1.0), bw(40, 2.0);
  const std::vector<long> out(40, 10), tape(40, 30);
  const remat::chain c = remat::chain_from(10, fw, bw, out, tape);
  const remat::coarse_chain cc = remat::coarsen(c, 8);
  const remat::solve_result r = remat::solve(cc.chain, 600, {.slots = remat::exact_units});
  std::vector<remat::op> ops;
  for (const remat::op o : remat::views::expand(cc, r.schedule.ops)) ops.push_back(o);
  return r.feasible && remat::simulate(c, ops).fits(600) ? 0 : 1;
}

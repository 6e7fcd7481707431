// Fuzz target: the branch-and-bound search at one budget (detail/dp/engines/search.hpp) against
// the dense reference DP in exact units, on small fuzzed chains (sizes whose sum stays small
// enough for the reference's table), both branch sets, 1 to 64 lower-bound slots: the same value
// and the same schedule, bit for bit. Then a cap of a quarter of its work must stop the same
// search, and the stopped search, resumed with other lower bounds, must reach the same result.
// The solve runs the search only where its frontier DP would take long, which small chains never
// do: this drives it directly.
#include <remat/detail/dp/engines/reference.hpp>
#include <remat/detail/dp/engines/search.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>

#include "dp_chains.hpp"
#include "fuzz_input.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

using remat::size_type;
using namespace remat::detail;
using remat::testing::everything;

lower_bound_table bounds_at(const model& md, size_type m, size_type slots, dp_branches branches) {
  return make_lower_bounds(plan_lower_bounds(md, m, slots, branches, 1), branches, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using remat::fuzz::fail;
  remat::fuzz::byte_reader in(data, size);
  const std::optional<remat::chain> valid = in.valid_chain(7);
  if (!valid) return 0;
  const remat::chain& c = *valid;
  const model md = make_model(c, 1);
  // Where the solve searches: exact sums of times and of sizes.
  if (!md.exact_sums || !need_in_doubles(md)) return 0;
  const size_type M = everything(md, 4096);
  if (M < 0) return 0;
  const dp_branches branches =
      in.byte() % 2 == 0 ? dp_branches::tape_and_checkpoint : dp_branches::checkpoint_only;
  const size_type m = (size_type{in.byte()} << 8 | size_type{in.byte()}) % (M + 1);
  const size_type slots = 1 + in.byte() % 64;

  const reference_table ref = reference_dp(md, M, branches);
  const interval_bounds b = make_interval_bounds(md, persistent_need(md, branches), branches);
  const lower_bound_table lb = bounds_at(md, m, slots, branches);
  search::engine whole(md, b, branches);
  whole.restart(lb, infinite_time);
  const search_result r = search_dp(md, whole, m);
  if (!r.complete) fail("the search without a cap did not finish");
  const double want = ref.value[ref.at(0, md.L, m)];
  if (r.value != want) fail("the search's value is not the dense DP's");
  if (want < infinite_time) {
    if (r.ops != reference_ops(md, ref, 0, md.L, m))
      fail("the search's schedule is not the dense DP's");
  } else if (!r.ops.empty()) {
    fail("ops for an infeasible memory");
  }

  if (r.work < 8) return 0;
  search::engine s(md, b, branches);  // a new one: `whole` keeps its cells
  s.restart(lb, r.work / 4);
  const search_result part = search_dp(md, s, m);
  if (part.complete || !part.ops.empty()) fail("a quarter of the work finished the same search");
  const lower_bound_table other = bounds_at(md, m, 1 + in.byte() % 64, branches);
  s.restart(other, infinite_time);
  const search_result resumed = search_dp(md, s, m);
  if (!resumed.complete || resumed.value != want || resumed.ops != r.ops)
    fail("the resumed search differs from the whole one");
  return 0;
}

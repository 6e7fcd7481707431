// docs/offload.md's chain A, which the offloading tests share: L = 2, x = [5, 1, 1],
// xb = [-, 1, 1], fw = [4, 4], bw = [4, 8], loss time 1 and overhead 20, both bandwidths
// `bandwidth` (5/4: a_0 moves in 4). `chain_a_ops()`: a_0 offloaded during F_all(0) and prefetched
// during B(1), the schedule of its worked example (peak 23, time 21).
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <vector>

namespace remat::testing {

inline chain chain_a(double bandwidth = 5.0 / 4) {
  chain c;
  c.input_size = 5;
  c.stages = {{4, 4, 1, 1, 0, 0}, {4, 8, 1, 1, 0, 0}};
  c.loss_time = 1;
  c.loss_overhead = 20;
  c.transfer = {bandwidth, bandwidth};
  return c;
}

inline std::vector<op> chain_a_ops() {
  return {f_all(0), offload(0), f_all(1), loss_op(2), backward(1), prefetch(0), backward(0)};
}

}  // namespace remat::testing

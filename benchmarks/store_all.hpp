// Store-all's figures, the reference every benchmark table divides by: the peak of keeping every
// tape (replayed by the simulator) and its time, the sum of every forward, the loss and every
// backward (no op waits in it).
#pragma once

#include <remat/solve.hpp>

#include <cstdint>

namespace bench {

inline remat::size_type store_all_peak(const remat::chain& c) {
  return remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
      .peak_memory;
}

inline double store_all_time(const remat::chain& c) {
  double t = c.loss_time;
  for (const remat::stage& s : c.stages) t += s.forward_time + s.backward_time;
  return t;
}

}  // namespace bench

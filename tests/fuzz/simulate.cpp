// Fuzz target: the simulator (remat/simulate.hpp) on arbitrary op sequences, invalid kinds and
// stage indices included, over small chains with hostile sizes and times. Checks that the figures
// it reports are consistent with each other and that every failure can be described.
#include <remat/simulate.hpp>

#include "fuzz_input.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  remat::fuzz::byte_reader in(data, size);
  const std::optional<remat::chain> valid = in.valid_chain(8);
  if (!valid) return 0;
  const remat::chain& c = *valid;
  const auto L = static_cast<std::int32_t>(c.length());
  std::vector<remat::op> ops;
  while (!in.empty()) {
    remat::op o;
    o.kind = static_cast<remat::op_kind>(in.pick(7));  // 5 and 6 are no operation
    const std::uint8_t s = in.byte();
    if (s == 255)
      o.stage = std::numeric_limits<std::int32_t>::max();
    else if (s == 254)
      o.stage = std::numeric_limits<std::int32_t>::min();
    else if (s >= 128)
      o.stage = o.kind == remat::op_kind::loss ? L : static_cast<std::int32_t>(s % (L + 1)) - 1;
    else
      o.stage = static_cast<std::int32_t>(s % 12) - 1;
    ops.push_back(o);
  }
  const remat::replay_result r = remat::simulate(c, std::span<const remat::op>(ops));

  const std::size_t replayed = r.valid() ? ops.size() : std::min(r.first_invalid, ops.size());
  if (!r.valid() && r.first_invalid > ops.size()) remat::fuzz::fail("first_invalid out of range");
  if (r.op_peak.size() != replayed || r.memory_after.size() != replayed)
    remat::fuzz::fail("one peak and one memory figure per replayed op");
  remat::size_type peak = c.input_size;
  for (std::size_t i = 0; i < replayed; ++i) {
    if (r.memory_after[i] < 0 || r.memory_after[i] > r.op_peak[i])
      remat::fuzz::fail("memory after an op is negative or above its peak");
    peak = std::max(peak, r.op_peak[i]);
  }
  if (peak != r.peak_memory) remat::fuzz::fail("peak_memory is not the largest op peak");
  if (!(r.makespan >= 0)) remat::fuzz::fail("negative makespan");
  if (remat::describe(r, ops).empty()) remat::fuzz::fail("an empty description");
  return 0;
}

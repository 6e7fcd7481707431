// Schedules: sequences of ops (op.hpp) with what a solver predicts for them, and their text form.
#pragma once

#include <remat/concepts.hpp>
#include <remat/op.hpp>
#include <remat/op_table.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

/// `F_ck(3)`, `loss`, `B(0)`, `O(2,a)`, `P(3,t)`; `F_all(3,1)` for option 1 (option 0 is
/// `F_all(3)`).
inline std::string to_string(const op& o) {
  const std::string kind(name(o.kind));
  if (is_op_kind(o.kind) && rule(o.kind).indices == index_range::length) return kind;
  if (is_transfer(o.kind))
    return kind + "(" + std::to_string(o.stage) + (o.tensor == tensor_kind::tape ? ",t)" : ",a)");
  if (o.option != 0)
    return kind + "(" + std::to_string(o.stage) + "," + std::to_string(o.option) + ")";
  return kind + "(" + std::to_string(o.stage) + ")";
}

/// A schedule with what its solver predicts for it. `makespan` and `peak_memory` are in the
/// chain's own units (time, and memory as given, not discretized slots).
struct schedule {
  std::vector<op> ops;
  double makespan = 0;
  size_type peak_memory = 0;

  friend constexpr bool operator==(const schedule&, const schedule&) = default;
};

/// The ops, space-separated: `F_ck(0) F_none(1) F_all(2) loss B(2) ...`.
inline std::string to_string(const schedule& s) {
  std::string out;
  for (const op& o : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(o);
  }
  return out;
}

}  // namespace remat

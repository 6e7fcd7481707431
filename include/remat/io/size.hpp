// Sizes as people write them: `800`, `12GB`, `1536MiB`. remat-solve's `--budget` and the Python
// package's `solve(chain, "512MiB")` read budgets with this one parser.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace remat::io {

/// A non-negative integer with an optional unit (B, KB, MB, GB, KiB, MiB, GiB), exactly as
/// written (no sign, no space, no fraction). Throws `std::invalid_argument` whose message quotes
/// the text and says what is wrong: `'12XB': unknown unit 'XB' (use B, KB, ...)`.
inline size_type parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + std::string(text) + "': " + why);
  };
  if (number.empty() || unit.starts_with(".") || unit.starts_with(","))
    throw bad("must be a non-negative integer with an optional unit (e.g. 800, 12GB, 1536MiB)");
  struct suffix {
    std::string_view name;
    size_type factor;
  };
  static constexpr suffix units[] = {{"", 1},
                                     {"B", 1},
                                     {"KB", 1000},
                                     {"MB", 1000000},
                                     {"GB", 1000000000},
                                     {"KiB", size_type{1} << 10},
                                     {"MiB", size_type{1} << 20},
                                     {"GiB", size_type{1} << 30}};
  const auto* found = std::find_if(std::begin(units), std::end(units),
                                   [&](const suffix& s) { return s.name == unit; });
  if (found == std::end(units))
    throw bad("unknown unit '" + std::string(unit) + "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  constexpr size_type limit = std::numeric_limits<size_type>::max();
  size_type value = 0;
  for (const char ch : number) {
    const size_type digit = ch - '0';
    if (value > (limit - digit) / 10) throw bad("too large (the limit is 2^63 - 1 units)");
    value = value * 10 + digit;
  }
  if (value > limit / found->factor) throw bad("too large (the limit is 2^63 - 1 units)");
  return value * found->factor;
}

}  // namespace remat::io

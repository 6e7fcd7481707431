// The value of remat-solve's `--bandwidth` and remat-zoo's `--transfer` (docs/cli.md): the link
// between device and host memory, one rate for both directions or `OUT,IN`, each a number with
// an optional unit per second (`25GB/s`, `47GB/s,55GB/s`), set on a chain in its own units.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace remat::tools {

/// A bandwidth that does not make sense, or that a chain's units cannot take. The message names
/// the option and its value and says what to change.
class bandwidth_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One direction as written: `value` in bytes per second where a unit was given
/// (`per_second`), else already in the chain's memory units per time unit.
struct rate_arg {
  double value = 0;
  bool per_second = false;
};

/// The option's value as written: device-to-host (`offload`) and host-to-device (`prefetch`)
/// rates, equal unless given as `OUT,IN`.
struct bandwidth_arg {
  std::string option;  ///< the option's name, for messages
  std::string text;    ///< the value as written
  rate_arg offload;
  rate_arg prefetch;
};

namespace detail {

inline bandwidth_error bad_bandwidth(const bandwidth_arg& arg, const std::string& why) {
  return bandwidth_error(arg.option + " '" + arg.text + "': " + why);
}

// One rate: digits with an optional fraction and exponent (no sign: rates are >= 0), then
// nothing (the chain's own units) or a unit per second.
inline rate_arg parse_rate(const bandwidth_arg& arg, std::string_view text) {
  const auto digit = [&](std::size_t at) {
    return at < text.size() && text[at] >= '0' && text[at] <= '9';
  };
  std::size_t i = 0, digits = 0;
  for (; digit(i); ++i) ++digits;
  if (i < text.size() && text[i] == '.')
    for (++i; digit(i); ++i) ++digits;
  if (digits > 0 && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    if (digit(j)) {
      i = j;
      while (digit(i)) ++i;
    }
  }
  if (digits == 0)
    throw bad_bandwidth(arg,
                        "must be a non-negative number with an optional unit per second, or two "
                        "as OUT,IN (e.g. 25GB/s, 47GB/s,55GB/s, 1.5e7, 0 for none)");
  struct suffix {
    std::string_view name;
    double factor;
  };
  static constexpr suffix units[] = {{"B/s", 1},        {"KB/s", 1e3},     {"MB/s", 1e6},
                                     {"GB/s", 1e9},     {"TB/s", 1e12},    {"KiB/s", 0x1p10},
                                     {"MiB/s", 0x1p20}, {"GiB/s", 0x1p30}, {"TiB/s", 0x1p40}};
  const std::string_view unit = text.substr(i);
  rate_arg r;
  double factor = 1;
  if (!unit.empty()) {
    const auto* found = std::find_if(std::begin(units), std::end(units),
                                     [&](const suffix& s) { return s.name == unit; });
    if (found == std::end(units))
      throw bad_bandwidth(arg, "unknown unit '" + std::string(unit) +
                                   "' (use B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s or "
                                   "TiB/s; a number without a unit is in the chain's units)");
    r.per_second = true;
    factor = found->factor;
  }
  // strtod, not from_chars: some standard libraries still lack the floating-point overloads.
  const std::string number(text.substr(0, i));
  r.value = std::strtod(number.c_str(), nullptr) * factor;
  if (!std::isfinite(r.value)) throw bad_bandwidth(arg, "too large");
  return r;
}

// Time units per second of a chain's `units.time`, where it is one this tool knows.
inline std::optional<double> time_units_per_second(std::string_view time_unit) {
  if (time_unit == "s") return 1.0;
  if (time_unit == "ms") return 1e3;
  if (time_unit == "us") return 1e6;
  return std::nullopt;
}

// A chain's `units.memory` counts bytes (absent: bytes, as chain-format.md's sizes usually are).
inline bool counts_bytes(std::string_view memory_unit) {
  return memory_unit.empty() || memory_unit == "bytes" || memory_unit == "B";
}

}  // namespace detail

/// Parses `text`, the value of `option`: `RATE` or `OUT,IN`. Throws `bandwidth_error`.
inline bandwidth_arg parse_bandwidth(std::string_view option, std::string_view text) {
  bandwidth_arg arg{std::string(option), std::string(text), {}, {}};
  const auto comma = text.find(',');
  if (comma != std::string_view::npos && text.find(',', comma + 1) != std::string_view::npos)
    throw detail::bad_bandwidth(arg, "give one rate, or two as OUT,IN");
  arg.offload = detail::parse_rate(arg, text.substr(0, comma));
  arg.prefetch = comma == std::string_view::npos ? arg.offload
                                                 : detail::parse_rate(arg, text.substr(comma + 1));
  return arg;
}

/// Bytes per second of `rate`, a bandwidth in the memory units per time unit of a chain with
/// these units; none where the units are not bytes and seconds (or a fraction of one).
inline std::optional<double> bytes_per_second(double rate, std::string_view time_unit,
                                              std::string_view memory_unit) {
  const auto per_second = detail::time_units_per_second(time_unit);
  if (!per_second || !detail::counts_bytes(memory_unit)) return std::nullopt;
  return rate * *per_second;
}

/// `arg` in the memory units per time unit of a chain whose file gives `time_unit` and
/// `memory_unit` (`units.time`, `units.memory`; empty when absent). A rate with a unit per
/// second needs a time unit of s, ms or us and a memory unit of bytes (or none); a bare number
/// is taken as it is. Throws `bandwidth_error`.
inline transfer_rates to_transfer_rates(const bandwidth_arg& arg, std::string_view time_unit,
                                        std::string_view memory_unit) {
  const auto per_second = detail::time_units_per_second(time_unit);
  const auto convert = [&](const rate_arg& r) {
    if (!r.per_second) return r.value;
    if (!per_second || !detail::counts_bytes(memory_unit)) {
      const auto shown = [](std::string_view u) {
        return u.empty() ? std::string("absent") : "'" + std::string(u) + "'";
      };
      throw detail::bad_bandwidth(
          arg, "the chain's units (time " + shown(time_unit) + ", memory " + shown(memory_unit) +
                   ") are not seconds and bytes: a unit per second needs units.time s, ms or us "
                   "and units.memory bytes, B or none; give a number without a unit, in the "
                   "chain's memory units per time unit");
    }
    // Dividing by an exact power of ten keeps 25GB/s at exactly 25000000 bytes per ms.
    return r.value / *per_second;
  };
  return {convert(arg.offload), convert(arg.prefetch)};
}

/// Sets `c`'s transfer to `arg` (see `to_transfer_rates`), checked as `remat::validate` checks a
/// chain (a rate so small that moving the chain's memory overflows the time is refused). Throws
/// `bandwidth_error`.
inline void set_transfer(chain& c, const bandwidth_arg& arg, std::string_view time_unit,
                         std::string_view memory_unit) {
  chain with = c;
  with.transfer = to_transfer_rates(arg, time_unit, memory_unit);
  try {
    validate(with);
  } catch (const chain_error& e) {
    if (e.field().starts_with("transfer.")) throw detail::bad_bandwidth(arg, e.what());
    throw;
  }
  c.transfer = with.transfer;
}

}  // namespace remat::tools

// The checks a field's value goes through in remat's JSON files (chain files, graph files), so
// that both name a wrong value the same way. Each takes the value and a function that makes the
// file's own error from a rule ("must be an integer (got 1.5)"), and returns the value or throws
// that error.
#pragma once

#include <remat/chain.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace remat::io::detail {

using json = nlohmann::json;

// A time: any JSON number; its sign and finiteness are the model's validation to check.
template <class Error>
double time_value(const json& v, const Error& error) {
  if (!v.is_number()) throw error(std::string("must be a number (got ") + v.type_name() + ")");
  return v.get<double>();
}

// A size: a JSON integer up to 2^62. Negative integers are left to the model's validation.
template <class Error>
size_type size_value(const json& v, const Error& error) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(max_size))
      throw error("must be <= 2^62 (" + std::to_string(u) + ")");
    return static_cast<size_type>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Integer literals beyond 64 bits arrive as floats: report them as out of range.
    if (d == std::floor(d) && std::fabs(d) >= 0x1p63)
      throw error((d < 0 ? "must be >= 0 (" : "must be <= 2^62 (") + v.dump() + ")");
    if (d == std::floor(d))
      throw error("must be an integer (got " + v.dump() +
                  "; write sizes without a fraction or exponent)");
    throw error("must be an integer (got " + v.dump() + ")");
  }
  throw error(std::string("must be an integer (got ") + v.type_name() + ")");
}

template <class Error>
std::string string_value(const json& v, const Error& error) {
  if (!v.is_string()) throw error(std::string("must be a string (got ") + v.type_name() + ")");
  return v.get<std::string>();
}

}  // namespace remat::io::detail

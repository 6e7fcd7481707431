// Tests of examples/tools/bandwidth_arg.hpp, the value of remat-solve's --bandwidth and
// remat-zoo's --transfer: what each spelling becomes in a chain's units, and every refusal.
#include "bandwidth_arg.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>

namespace unit_tools_bandwidth_arg_test {

namespace {

using remat::transfer_rates;
using remat::tools::bandwidth_error;
using remat::tools::parse_bandwidth;
using remat::tools::to_transfer_rates;

// `text` as --bandwidth, in bytes per ms.
transfer_rates in_ms(std::string_view text) {
  return to_transfer_rates(parse_bandwidth("--bandwidth", text), "ms", "bytes");
}

// The message `text` is refused with; empty when it is accepted.
std::string refusal(std::string_view text) {
  try {
    in_ms(text);
  } catch (const bandwidth_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_bandwidth: units per second, powers of 1000 and 1024, and bare numbers") {
  CHECK(in_ms("25GB/s") == transfer_rates{25e6, 25e6});
  CHECK(in_ms("47GB/s,55GB/s") == transfer_rates{47e6, 55e6});
  CHECK(in_ms("400MB/s") == transfer_rates{400e3, 400e3});
  CHECK(in_ms("1TB/s") == transfer_rates{1e9, 1e9});
  CHECK(in_ms("3KB/s") == transfer_rates{3, 3});
  CHECK(in_ms("2000B/s") == transfer_rates{2, 2});
  CHECK(in_ms("25GiB/s") == transfer_rates{25 * 0x1p30 / 1e3, 25 * 0x1p30 / 1e3});
  CHECK(in_ms("1KiB/s,1MiB/s") == transfer_rates{1.024, 1048.576});
  CHECK(in_ms("1TiB/s") == transfer_rates{0x1p40 / 1e3, 0x1p40 / 1e3});
  CHECK(in_ms("12.5GB/s") == transfer_rates{12.5e6, 12.5e6});
  CHECK(in_ms("2.5e1GB/s") == transfer_rates{25e6, 25e6});
  // A bare number is already in the chain's units; 0 is no link in that direction.
  CHECK(in_ms("1.25") == transfer_rates{1.25, 1.25});
  CHECK(in_ms("2.5e7") == transfer_rates{2.5e7, 2.5e7});
  CHECK(in_ms(".5,5.") == transfer_rates{0.5, 5});
  CHECK(in_ms("0") == transfer_rates{});
  CHECK(in_ms("0,25GB/s") == transfer_rates{0, 25e6});
  CHECK(in_ms("0GB/s") == transfer_rates{});

  const auto arg = parse_bandwidth("--bandwidth", "47GB/s,5");
  CHECK(arg.option == "--bandwidth");
  CHECK(arg.text == "47GB/s,5");
  CHECK(arg.offload.per_second);
  CHECK(arg.offload.value == 47e9);
  CHECK_FALSE(arg.prefetch.per_second);
  CHECK(arg.prefetch.value == 5);
}

TEST_CASE("to_transfer_rates: seconds, milliseconds and microseconds; bytes or no memory unit") {
  const auto arg = parse_bandwidth("--bandwidth", "25GB/s,1");
  CHECK(to_transfer_rates(arg, "s", "bytes") == transfer_rates{25e9, 1});
  CHECK(to_transfer_rates(arg, "ms", "B") == transfer_rates{25e6, 1});
  CHECK(to_transfer_rates(arg, "us", "") == transfer_rates{25e3, 1});
  CHECK(remat::tools::bytes_per_second(25e6, "ms", "bytes") == 25e9);
  CHECK(remat::tools::bytes_per_second(25e3, "us", "") == 25e9);
  CHECK_FALSE(remat::tools::bytes_per_second(25, "ms", "slots").has_value());
  CHECK_FALSE(remat::tools::bytes_per_second(25, "", "bytes").has_value());

  // Units it cannot read: a rate per second is refused, a bare number is taken as it is.
  const std::string why =
      "are not seconds and bytes: a unit per second needs units.time s, ms or us and "
      "units.memory bytes, B or none; give a number without a unit, in the chain's memory units "
      "per time unit";
  const auto refused = [&](std::string_view time, std::string_view memory) {
    try {
      to_transfer_rates(arg, time, memory);
    } catch (const bandwidth_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused("ms", "slots") ==
        "--bandwidth '25GB/s,1': the chain's units (time 'ms', memory 'slots') " + why);
  CHECK(refused("", "bytes") ==
        "--bandwidth '25GB/s,1': the chain's units (time absent, memory 'bytes') " + why);
  CHECK(refused("min", "") ==
        "--bandwidth '25GB/s,1': the chain's units (time 'min', memory absent) " + why);
  CHECK(to_transfer_rates(parse_bandwidth("--bandwidth", "7,8"), "", "slots") ==
        transfer_rates{7, 8});
}

TEST_CASE("parse_bandwidth: what is refused, and why") {
  const std::string number =
      "must be a non-negative number with an optional unit per second, or two as OUT,IN (e.g. "
      "25GB/s, 47GB/s,55GB/s, 1.5e7, 0 for none)";
  for (const char* bad :
       {"", "-1", "+5", "GB/s", " 5", "x", ".", "e5", "inf", "nan", "1,", ",1", "-25GB/s"})
    CHECK(refusal(bad) == "--bandwidth '" + std::string(bad) + "': " + number);
  const std::string units =
      " (use B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s or TiB/s; a number without a unit "
      "is in the chain's units)";
  const std::pair<const char*, const char*> unknown[] = {
      {"25GB", "GB"},     {"25gb/s", "gb/s"}, {"25 GB/s", " GB/s"},  {"25Gbps", "Gbps"},
      {"25GiBs", "GiBs"}, {"25PB/s", "PB/s"}, {"1e", "e"},           {"1e+GB/s", "e+GB/s"},
      {"0x10", "x10"},    {"5kB/s", "kB/s"},  {"25GB/s/s", "GB/s/s"}};
  for (const auto& [bad, unit] : unknown)
    CHECK(refusal(bad) ==
          "--bandwidth '" + std::string(bad) + "': unknown unit '" + unit + "'" + units);
  CHECK(refusal("1,2,3") == "--bandwidth '1,2,3': give one rate, or two as OUT,IN");
  CHECK(refusal("1e400") == "--bandwidth '1e400': too large");
  CHECK(refusal("1e300TB/s") == "--bandwidth '1e300TB/s': too large");
  // The option's name is the one given.
  try {
    parse_bandwidth("--transfer", "fast");
    FAIL("accepted");
  } catch (const bandwidth_error& e) {
    CHECK(std::string(e.what()).starts_with("--transfer 'fast': must be a non-negative number"));
  }
}

TEST_CASE("set_transfer: the chain's rates, checked as remat::validate checks a chain") {
  remat::chain c;
  c.input_size = 10;
  c.stages = {{1, 2, 40, 80, 0, 0}};
  remat::tools::set_transfer(c, parse_bandwidth("--bandwidth", "25GB/s"), "ms", "bytes");
  CHECK(c.transfer == transfer_rates{25e6, 25e6});
  remat::tools::set_transfer(c, parse_bandwidth("--bandwidth", "0"), "ms", "bytes");
  CHECK(c.transfer == transfer_rates{});
  // A rate at which moving the chain's memory takes longer than a double holds.
  try {
    remat::tools::set_transfer(c, parse_bandwidth("--bandwidth", "1e-320"), "ms", "bytes");
    FAIL("accepted");
  } catch (const bandwidth_error& e) {
    CHECK(std::string(e.what()).starts_with(
        "--bandwidth '1e-320': transfer.offload_bandwidth: is too small"));
  }
  CHECK(c.transfer == transfer_rates{});  // unchanged by a refusal
}

}  // namespace unit_tools_bandwidth_arg_test

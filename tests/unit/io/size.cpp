// Tests of remat/io/size.hpp: sizes with decimal and binary units, and what each bad one says.
#include <remat/io/size.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

namespace unit_io_size_test {

TEST_CASE("io::parse_size: integers with decimal and binary units") {
  using remat::io::parse_size;
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("800B") == 800);
  CHECK(parse_size("12GB") == 12000000000);
  CHECK(parse_size("1536MiB") == 1610612736);
  CHECK(parse_size("007") == 7);
  CHECK(parse_size("9223372036854775807") == 9223372036854775807);
  CHECK(parse_size("8589934591GiB") == 8589934591 * 1073741824LL);
  for (const char* bad : {"", "B", "-1", "+1", "1.0", "1,000", "9223372036854775808",
                          "8589934592GiB", "1 GB", "1gb", "1TB"})
    CHECK_THROWS_AS(parse_size(bad), std::invalid_argument);
}

TEST_CASE("io::parse_size: the message quotes the text and says what is wrong") {
  const auto message = [](const char* text) {
    try {
      (void)remat::io::parse_size(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message("12XB") == "'12XB': unknown unit 'XB' (use B, KB, MB, GB, KiB, MiB or GiB)");
  CHECK(message("1.5GB") ==
        "'1.5GB': must be a non-negative integer with an optional unit (e.g. 800, 12GB, 1536MiB)");
  CHECK(message("8589934592GiB") == "'8589934592GiB': too large (the limit is 2^63 - 1 units)");
}

}  // namespace unit_io_size_test

// Tests of remat/io/chain_json.hpp: reading every chain-format.md error with its message, the
// bundled chains, defaults, and writing then reading back.
#include <remat/io/chain_json.hpp>

#include <random_chain.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace unit_io_chain_json_test {

namespace {

namespace fs = std::filesystem;
using remat::io::chain_file;
using remat::io::chain_file_error;

const fs::path data_dir = fs::path(REMAT_SOURCE_DIR) / "tests" / "data" / "chains";

chain_file read_text(const std::string& text, std::string_view source = "chain.json") {
  std::istringstream in(text);
  return remat::io::read_chain(in, source);
}

// The message `read_text(text)` fails with; empty when it reads fine.
std::string error_of(const std::string& text) {
  try {
    read_text(text);
  } catch (const chain_file_error& e) {
    return e.what();
  }
  return "";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

chain_file round_trip(const chain_file& f) {
  std::ostringstream out;
  remat::io::write_chain(out, f);
  return read_text(out.str());
}

}  // namespace

TEST_CASE("every invalid fixture fails with the message listed in expected-errors.txt") {
  // Each line is `FILE: LOCATION: RULE`, the exact what() for the file read under its own name.
  const fs::path dir = data_dir / "invalid";
  std::map<std::string, std::string> expected;
  std::ifstream list(dir / "expected-errors.txt");
  for (std::string line; std::getline(list, line);)
    if (!line.empty()) expected[line.substr(0, line.find(": "))] = line;
  REQUIRE(expected.size() >= 30);

  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    REQUIRE_MESSAGE(expected.count(name) == 1, "no expected message for " << name);
    std::ifstream in(entry.path(), std::ios::binary);
    try {
      remat::io::read_chain(in, name);
      FAIL("read without error");
    } catch (const chain_file_error& e) {
      CHECK(std::string(e.what()) == expected[name]);
      CHECK(e.source() == name);
    }
  }
  CHECK(files == expected.size());
}

TEST_CASE("the error names the stage and the field") {
  try {
    remat::io::read_chain_file(data_dir / "invalid" / "tape-below-output.json");
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(e.stage_index() == 3);
    CHECK(e.field() == "tape_size");
    CHECK(e.source() == (data_dir / "invalid" / "tape-below-output.json").string());
    CHECK(std::string(e.what()) ==
          e.source() + ": stages[3].tape_size: must be >= output_size (12 < 40)");
  }
  try {
    read_text(R"({"input_size": 1, "stages": [{"forward_time": 1, "backward_time": 1,
                  "output_size": 1, "tape_size": 1}, {"backward_time": 1}]})");
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(e.stage_index() == 1);
    CHECK(e.field() == "forward_time");
    CHECK(std::string(e.what()) == "chain.json: stages[1].forward_time: missing (required)");
  }
  try {
    read_text(R"({"input_size": 1, "stages": []})");
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(e.stage_index() == chain_file_error::no_stage);
    CHECK(e.field() == "stages");
  }
}

TEST_CASE("the measured ResNet-18 chains read, with their names and units") {
  const chain_file f = remat::io::read_chain_file(data_dir / "resnet18-rockmate.json");
  CHECK(f.name == "resnet18-rockmate");
  CHECK(f.time_unit == "ms");
  CHECK(f.memory_unit == "slots");
  REQUIRE(f.chain.length() == 13);
  REQUIRE(f.stage_names.size() == 13);
  CHECK(f.stage_names.front() == "block0");
  CHECK(f.stage_names.back() == "block12");
  CHECK(f.chain.input_size == 0);
  CHECK(f.chain.loss_time == 0);
  const remat::stage& s3 = f.chain.stages[3];
  CHECK(s3.forward_time == 5.972171);
  CHECK(s3.backward_time == 6.625163);
  CHECK(s3.output_size == 26);
  CHECK(s3.tape_size == 101);
  CHECK(s3.forward_overhead == 149);
  CHECK(s3.backward_overhead == 127);

  // The variant with Rockmate's options per stage: the stages' own fields are those of the plain
  // file, and the options are read as listed.
  const chain_file g = remat::io::read_chain_file(data_dir / "resnet18-rockmate-options.json");
  CHECK(g.name == "resnet18-rockmate-options");
  CHECK(g.stage_names == f.stage_names);
  const std::vector<std::size_t> counts{0, 0, 0, 7, 7, 11, 7, 10, 7, 7, 5, 0, 0};
  REQUIRE(g.chain.length() == counts.size());
  for (std::size_t k = 0; k < counts.size(); ++k) CHECK(g.chain.stages[k].options.size() == counts[k]);
  const remat::stage_option& o = g.chain.stages[3].options[1];
  CHECK(o.forward_time == 5.972171);
  CHECK(o.backward_time == 11.967317);
  CHECK(o.tape_size == 51);
  CHECK(o.forward_overhead == 124);
  CHECK(o.backward_overhead == 152);
  remat::chain without = g.chain;
  for (remat::stage& s : without.stages) s.options.clear();
  CHECK(without == f.chain);
  CHECK(round_trip(g).chain == g.chain);
}

TEST_CASE("options: optional overheads, and errors that name the option and its field") {
  const auto with_options = [](const std::string& options) {
    return R"({"input_size": 1, "stages": [{"forward_time": 1, "backward_time": 2,
               "output_size": 3, "tape_size": 4, "options": )" +
           options + "}]}";
  };
  const chain_file f =
      read_text(with_options(R"([{"forward_time": 0.5, "backward_time": 3, "tape_size": 3},
                                   {"forward_time": 1, "backward_time": 1, "tape_size": 6,
                                    "forward_overhead": 2, "backward_overhead": 5}])"));
  REQUIRE(f.chain.stages[0].options.size() == 2);
  CHECK(f.chain.stages[0].options[0] == remat::stage_option{0.5, 3, 3, 0, 0});
  CHECK(f.chain.stages[0].options[1] == remat::stage_option{1, 1, 6, 2, 5});
  CHECK(round_trip(f).chain == f.chain);
  CHECK(read_text(with_options("[]")).chain.stages[0].options.empty());
  CHECK(error_of(with_options(R"([{"backward_time": 1, "tape_size": 3}])")) ==
        "chain.json: stages[0].options[0].forward_time: missing (required)");
  CHECK(error_of(with_options(R"({"tape_size": 3})")) ==
        "chain.json: stages[0].options: must be an array (got object)");
  CHECK(error_of(with_options("[1]")) == "chain.json: stages[0].options[0]: must be an object (got number)");
  CHECK(error_of(with_options(
            R"([{"forward_time": 1, "backward_time": 1, "tape_size": 3}, {"forward_time": 1, "backward_time": 1, "tape_size": 2}])")) ==
        "chain.json: stages[0].options[1].tape_size: must be >= output_size (2 < 3)");
}

TEST_CASE("optional fields default to zero or empty") {
  const chain_file f = read_text(R"({"input_size": 7, "stages": [
      {"forward_time": 1, "backward_time": 2.5, "output_size": 3, "tape_size": 4}]})");
  CHECK(f.name.empty());
  CHECK(f.time_unit.empty());
  CHECK(f.memory_unit.empty());
  CHECK(f.stage_names == std::vector<std::string>{""});
  CHECK(f.chain.input_size == 7);
  CHECK(f.chain.loss_time == 0);
  CHECK(f.chain.loss_overhead == 0);
  CHECK(f.chain.stages[0] == remat::stage{1, 2.5, 3, 4, 0, 0});

  // An empty loss object and units object are fine too.
  const chain_file g = read_text(R"({"input_size": 0, "loss": {}, "units": {}, "stages": [
      {"forward_time": 0, "backward_time": 0, "output_size": 0, "tape_size": 0}]})");
  CHECK(g.chain.loss_time == 0);
  CHECK(g.time_unit.empty());
}

TEST_CASE("recording_overhead: optional, the forward overhead when absent, written if it differs") {
  const chain_file f = read_text(R"({"input_size": 1, "stages": [
      {"forward_time": 1, "backward_time": 2, "output_size": 3, "tape_size": 4,
       "forward_overhead": 9, "recording_overhead": 2},
      {"forward_time": 1, "backward_time": 2, "output_size": 3, "tape_size": 4,
       "forward_overhead": 9},
      {"forward_time": 1, "backward_time": 2, "output_size": 3, "tape_size": 4,
       "forward_overhead": 9, "recording_overhead": 9}]})");
  REQUIRE(f.chain.stages[0].recording_overhead.has_value());
  CHECK(*f.chain.stages[0].recording_overhead == 2);
  CHECK_FALSE(f.chain.stages[1].recording_overhead.has_value());
  CHECK(remat::recording_overhead(f.chain.stages[1]) == 9);
  CHECK(f.chain.stages[2] == f.chain.stages[1]);

  const std::string text = remat::io::to_json(f).dump();
  CHECK(text.find("\"recording_overhead\":2") != std::string::npos);
  // Written once: the stages equal to their forward overhead carry no key.
  CHECK(text.find("recording_overhead") == text.rfind("recording_overhead"));
  CHECK(round_trip(f).chain == f.chain);

  CHECK(error_of(R"({"input_size": 1, "stages": [{"forward_time": 1, "backward_time": 2,
      "output_size": 3, "tape_size": 4, "recording_overhead": -1}]})")
            .starts_with("chain.json: stages[0].recording_overhead: must be >= 0"));
  CHECK(error_of(R"({"input_size": 1, "stages": [{"forward_time": 1, "backward_time": 2,
      "output_size": 3, "tape_size": 4, "recording_overhead": 1.5}]})")
            .starts_with("chain.json: stages[0].recording_overhead: must be"));
}

TEST_CASE("transfer: optional bandwidths, 0 when absent, written only when one is > 0") {
  const std::string stages = R"("input_size": 1, "stages": [{"forward_time": 1,
      "backward_time": 2, "output_size": 3, "tape_size": 4}])";
  const auto with_transfer = [&](const std::string& transfer) {
    return "{" + stages + R"(, "transfer": )" + transfer + "}";
  };
  const chain_file f =
      read_text(with_transfer(R"({"offload_bandwidth": 25000000, "prefetch_bandwidth": 5.5e7})"));
  CHECK(f.chain.transfer == remat::transfer_rates{25000000, 55000000});
  CHECK(f.chain.transfer.available());
  // Each bandwidth is optional: absent, that direction is unavailable.
  const chain_file one = read_text(with_transfer(R"({"prefetch_bandwidth": 0.25})"));
  CHECK(one.chain.transfer == remat::transfer_rates{0, 0.25});
  CHECK_FALSE(one.chain.transfer.available());
  CHECK(read_text(with_transfer("{}")).chain.transfer == remat::transfer_rates{});
  CHECK(read_text("{" + stages + "}").chain.transfer == remat::transfer_rates{});

  CHECK(error_of(with_transfer(R"({"offload_bandwidth": "25GB/s"})")) ==
        "chain.json: transfer.offload_bandwidth: must be a number (got string)");
  CHECK(error_of(with_transfer(R"({"prefetch_bandwidth": null})")) ==
        "chain.json: transfer.prefetch_bandwidth: must be a number (got null)");
  CHECK(error_of(with_transfer(R"({"offload_bandwidth": -1})")) ==
        "chain.json: transfer.offload_bandwidth: must be >= 0 (-1.000000)");
  CHECK(error_of(with_transfer(R"({"prefetch_bandwidth": -0.5})")) ==
        "chain.json: transfer.prefetch_bandwidth: must be >= 0 (-0.500000)");
  CHECK(error_of(with_transfer(R"({"offload_bandwidth": NaN})"))
            .starts_with("chain.json: not valid JSON: "));
  CHECK(error_of(with_transfer(R"({"offload_bandwidth": 1e999})")) ==
        "chain.json: cannot read: number overflow parsing '1e999'");
  CHECK(error_of(with_transfer("[25, 25]")) ==
        "chain.json: transfer: must be an object (got array)");
  // Finite, but moving the chain's memory at that rate would overflow the time: validate's rule.
  CHECK(error_of(with_transfer(R"({"offload_bandwidth": 1e-320})"))
            .starts_with("chain.json: transfer.offload_bandwidth: is too small"));
  try {
    read_text(with_transfer(R"({"offload_bandwidth": true})"));
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(e.stage_index() == chain_file_error::no_stage);
    CHECK(e.field() == "transfer.offload_bandwidth");
  }

  // Written after `loss`, both bandwidths; read back the same.
  const std::string text = remat::io::to_json(f).dump();
  CHECK(
      text.find(R"("transfer":{"offload_bandwidth":25000000.0,"prefetch_bandwidth":55000000.0})") !=
      std::string::npos);
  CHECK(text.find("\"loss\"") < text.find("\"transfer\""));
  CHECK(text.find("\"transfer\"") < text.find("\"stages\""));
  CHECK(round_trip(f).chain == f.chain);
  CHECK(round_trip(one).chain == one.chain);
  CHECK(remat::io::to_json(one).dump().find(R"("transfer":{"offload_bandwidth":0.0,)") !=
        std::string::npos);
  // Without a bandwidth > 0 nothing is written: the file of a chain without transfer.
  chain_file none = f;
  none.chain.transfer = {};
  CHECK(remat::io::to_json(none).dump().find("transfer") == std::string::npos);
  chain_file plain = read_text("{" + stages + "}");
  CHECK(remat::io::to_json(plain) == remat::io::to_json(none));
  // The writer validates the bandwidths as the reader does.
  chain_file negative = f;
  negative.chain.transfer.prefetch_bandwidth = -1;
  CHECK_THROWS_AS(remat::io::to_json(negative), remat::chain_error);
}

TEST_CASE("unknown keys are ignored, at every level") {
  const chain_file f = read_text(R"({"comment": ["anything", {"nested": 1}], "input_size": 1,
      "units": {"time": "s", "memory": "bytes", "energy": "J"},
      "loss": {"backward_time": 0.5, "forward_time": "ignored"},
      "stages": [{"forward_time": 1, "backward_time": 2, "output_size": 3, "tape_size": 4,
                  "options": [{"forward_time": 1, "backward_time": 1, "tape_size": 4,
                               "note": "rematerialize the ReLU"}], "flops": 1e12}]})");
  CHECK(f.time_unit == "s");
  REQUIRE(f.chain.stages[0].options.size() == 1);
  CHECK(f.chain.stages[0].options[0].tape_size == 4);
  CHECK(f.chain.loss_time == 0.5);
  CHECK(f.chain.stages[0].tape_size == 4);
}

TEST_CASE("sizes: integers from 0 to 2^62; anything written as a float is refused") {
  const auto stage_with = [](const std::string& size) {
    return R"({"input_size": 0, "stages": [{"forward_time": 1, "backward_time": 1,
               "output_size": 0, "tape_size": )" +
           size + "}]}";
  };
  CHECK(read_text(stage_with("4611686018427387904")).chain.stages[0].tape_size == remat::max_size);
  CHECK(read_text(stage_with("0")).chain.stages[0].tape_size == 0);
  CHECK(error_of(stage_with("4611686018427387905")) ==
        "chain.json: stages[0].tape_size: must be <= 2^62 (4611686018427387905)");
  CHECK(error_of(stage_with("18446744073709551616")) ==
        "chain.json: stages[0].tape_size: must be <= 2^62 (1.8446744073709552e+19)");
  CHECK(error_of(stage_with("-99999999999999999999")) ==
        "chain.json: stages[0].tape_size: must be >= 0 (-1e+20)");
  CHECK(error_of(stage_with("4.0")) ==
        "chain.json: stages[0].tape_size: must be an integer (got 4.0; write sizes without a "
        "fraction or exponent)");
  CHECK(error_of(stage_with("4e0")) ==
        "chain.json: stages[0].tape_size: must be an integer (got 4.0; write sizes without a "
        "fraction or exponent)");
  CHECK(error_of(stage_with("0.5")) ==
        "chain.json: stages[0].tape_size: must be an integer (got 0.5)");
  CHECK(error_of(stage_with("{}")) ==
        "chain.json: stages[0].tape_size: must be an integer (got object)");
  CHECK(error_of(stage_with("-0")) == "");  // an integer, and zero
}

TEST_CASE("times: any finite non-negative number, integers included") {
  const auto forward = [](const std::string& t) {
    return R"({"input_size": 0, "stages": [{"forward_time": )" + t +
           R"(, "backward_time": 1, "output_size": 0, "tape_size": 0}]})";
  };
  CHECK(read_text(forward("3")).chain.stages[0].forward_time == 3.0);
  CHECK(read_text(forward("2.5e-3")).chain.stages[0].forward_time == 2.5e-3);
  CHECK(read_text(forward("1e300")).chain.stages[0].forward_time == 1e300);
  // Finite, but a makespan built from it could overflow a double: remat::validate's rule.
  CHECK(error_of(forward("1.7976931348623157e308")) ==
        "chain.json: stages[0].forward_time: the chain's times are too large: (L + 1) x the "
        "forward times plus the backward times overflows a double");
  CHECK(error_of(forward("-1e-9")).starts_with("chain.json: stages[0].forward_time: must be >= 0"));
  CHECK(error_of(forward("1e999")) == "chain.json: cannot read: number overflow parsing '1e999'");
  CHECK(error_of(forward("NaN")).starts_with("chain.json: not valid JSON: "));
  CHECK(error_of(forward("null")) ==
        "chain.json: stages[0].forward_time: must be a number (got null)");
}

TEST_CASE("the format, when given, must be remat-chain/1") {
  const std::string rest = R"("input_size": 0, "stages": [{"forward_time": 1, "backward_time": 1,
                              "output_size": 0, "tape_size": 0}]})";
  CHECK(error_of(R"({"format": "remat-chain/1", )" + rest).empty());
  CHECK(error_of(R"({"format": 1, )" + rest) ==
        "chain.json: format: must be a string (got number)");
  CHECK(error_of(R"({"format": "rotor", )" + rest) ==
        "chain.json: format: unsupported \"rotor\" (this reader knows \"remat-chain/1\")");
}

TEST_CASE("input past the size limit is refused, whatever follows") {
  // A stream that never ends (as /dev/zero does): the reader stops at the limit.
  struct endless : std::streambuf {
    char block[4096] = {};
    int_type underflow() override {
      std::fill(std::begin(block), std::end(block), ' ');
      setg(block, block, block + sizeof block);
      return traits_type::to_int_type(block[0]);
    }
  } source;
  std::istream in(&source);
  try {
    remat::io::read_chain(in, "zeros", 1 << 20);
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(std::string(e.what()) ==
          "zeros: not a chain file: longer than 1048576 bytes (max_chain_file_bytes)");
  }
  // At the limit exactly, a file is read.
  const std::string text = R"({"stages": [{"forward_time": 1, "backward_time": 1,
      "output_size": 1, "tape_size": 1}], "input_size": 1})";
  std::istringstream exact(text);
  CHECK(remat::io::read_chain(exact, "exact", text.size()).chain.length() == 1);
  std::istringstream over(text);
  CHECK_THROWS_AS(remat::io::read_chain(over, "over", text.size() - 1), chain_file_error);
}

TEST_CASE("files that cannot be opened are named") {
  const fs::path missing = data_dir / "no-such-chain.json";
  try {
    remat::io::read_chain_file(missing);
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(std::string(e.what()).starts_with(missing.string() + ": cannot open: "));
  }
  try {
    remat::io::read_chain_file(data_dir);
    FAIL("read without error");
  } catch (const chain_file_error& e) {
    CHECK(std::string(e.what()) == data_dir.string() + ": cannot open: is a directory");
  }
}

TEST_CASE("writing then reading gives the same chain, names and units") {
  std::mt19937_64 rng(20240611);
  for (int n = 0; n < 200; ++n) {
    chain_file f;
    f.chain = remat::testing::random_chain(rng);
    if (n % 3 == 0) {
      std::uniform_real_distribution<double> rate(0, 1e9);
      f.chain.transfer = {n % 2 == 0 ? rate(rng) : 0.0, rate(rng)};
    }
    if (n % 2 == 0) {
      f.name = "chain " + std::to_string(n);
      f.time_unit = "ms";
      f.memory_unit = "bytes";
      for (std::size_t k = 0; k < f.chain.length(); ++k)
        f.stage_names.push_back(k % 3 == 1 ? "" : "layer \"" + std::to_string(k) + "\"\n\u00e9");
    }
    const chain_file back = round_trip(f);
    CHECK(back.chain == f.chain);
    CHECK(back.name == f.name);
    CHECK(back.time_unit == f.time_unit);
    CHECK(back.memory_unit == f.memory_unit);
    // The reader gives one name per stage; unnamed stages read back as "".
    if (f.stage_names.empty())
      CHECK(back.stage_names == std::vector<std::string>(f.chain.length()));
    else
      CHECK(back.stage_names == f.stage_names);
  }
}

TEST_CASE("times and sizes survive writing exactly, extremes included") {
  chain_file f;
  f.chain.input_size = remat::max_size / 64;
  f.chain.loss_time = 1.0 / 3.0;
  f.chain.loss_overhead = 1;
  for (const double t : {0.1, 1.666517, 5e-324, 2.2250738585072014e-308, 1e-300, 123456789.125,
                         std::numeric_limits<double>::max() / 1e10, 0.0}) {
    f.chain.stages.push_back({t, t * 0.5, remat::max_size / 64, remat::max_size / 64, 0, 7});
  }
  CHECK(round_trip(f).chain == f.chain);
}

TEST_CASE("the writer: key order, validation, names") {
  chain_file f;
  f.chain.input_size = 4;
  f.chain.stages.push_back({1, 2, 3, 5, 0, 0});
  f.name = "one";
  std::ostringstream out;
  remat::io::write_chain(out, f);
  const std::string text = out.str();
  CHECK(text.starts_with("{\n  \"format\": \"remat-chain/1\",\n  \"name\": \"one\",\n"));
  CHECK(text.ends_with("}\n"));
  CHECK(text.find("units") == std::string::npos);  // no units given, none written

  chain_file bad = f;
  bad.chain.stages[0].tape_size = 2;  // below its output
  CHECK_THROWS_AS(remat::io::to_json(bad), remat::chain_error);
  chain_file mismatched = f;
  mismatched.stage_names = {"a", "b"};
  CHECK_THROWS_AS(remat::io::to_json(mismatched), std::invalid_argument);

  const fs::path tmp = fs::temp_directory_path() / "remat-chain-json-test.json";
  remat::io::write_chain_file(tmp, f);
  CHECK(remat::io::read_chain_file(tmp).chain == f.chain);
  fs::remove(tmp);
  CHECK_THROWS_AS(remat::io::write_chain_file(data_dir / "no-such-dir" / "x.json", f),
                  chain_file_error);
}

TEST_CASE("no input crashes the reader: deep nesting and corrupted files") {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  CHECK(error_of(deep) == "chain.json: must be a JSON object (got array)");
  CHECK(error_of(std::string(200000, '{')).starts_with("chain.json: not valid JSON: "));

  // Corrupt a valid file byte by byte: every result is a chain or a chain_file_error.
  const std::string good = slurp(data_dir / "tiny-mlp.json");
  REQUIRE(!good.empty());
  std::mt19937_64 rng(7);
  int read = 0, refused = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, "0123456789-.e\"{}[],:"[rng() % 20]); break;
      }
    }
    try {
      read_text(text);
      ++read;
    } catch (const chain_file_error&) {
      ++refused;
    }
  }
  CHECK(read + refused == 3000);
  CHECK(refused > 0);
  CHECK(read > 0);
}

}  // namespace unit_io_chain_json_test

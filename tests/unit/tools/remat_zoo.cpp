// End-to-end tests of the remat-zoo executable: its chain files read back as the zoo's networks,
// carry the FLOP counts and settings, and bad arguments exit with status 2.
#include <remat/io/chain_json.hpp>
#include <remat/zoo.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <run_tool.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace unit_tools_remat_zoo_test {

namespace {

namespace fs = std::filesystem;

const std::string exe = REMAT_ZOO_EXE;
const bool no_tool = std::string_view(REMAT_ZOO_EXE).empty();  // built without the tools

using remat::testing::run_result;
using remat::testing::slurp;

const fs::path& scratch_dir() {
  static const remat::testing::scratch_dir dir("zoo-test");
  return dir.path();
}

run_result run(const std::vector<std::string>& args) {
  return remat::testing::run_tool(exe, args);
}

// The file's chain, names and extra keys are those of `expected`.
void check_matches(const std::string& text, const remat::zoo::network& expected) {
  std::istringstream in(text);
  const remat::io::chain_file f = remat::io::read_chain(in, "remat-zoo output");
  CHECK(f.chain == expected.chain);
  CHECK(f.stage_names == expected.stage_names);
  CHECK(f.name == expected.name);
  CHECK(f.time_unit == "ms");
  CHECK(f.memory_unit == "bytes");
  const nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(doc.at("format") == "remat-chain/1");
  CHECK(doc.at("total_flops").get<double>() == expected.total_flops);
  CHECK(doc.at("description") == expected.description);
  const nlohmann::json& stages = doc.at("stages");
  REQUIRE(stages.size() == expected.stage_flops.size());
  for (std::size_t k = 0; k < stages.size(); ++k)
    CHECK(stages[k].at("flops").get<double>() == expected.stage_flops[k]);
  const remat::zoo::settings& s = expected.used;
  const nlohmann::json& zoo = doc.at("zoo");
  CHECK(zoo.at("model") == s.model);
  CHECK(zoo.at("batch") == s.batch);
  CHECK(zoo.at("dtype") == std::string(remat::zoo::name(s.dtype)));
  CHECK(zoo.at("peak_flops").get<double>() == s.peak_flops);
  CHECK(zoo.at("bandwidth").get<double>() == s.bandwidth);
  if (s.image_size != 0) CHECK(zoo.at("image_size") == s.image_size);
  if (s.sequence_length != 0) CHECK(zoo.at("sequence_length") == s.sequence_length);
}

// `a` and `b` are the same JSON document, floating-point numbers equal to 1e-12 relative: the
// last bits of a time may differ where a compiler fuses a multiply and an add.
bool same_document(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>();
    const double y = b.get<double>();
    return std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same_document(*it, b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_document(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

void check_usage_error(const std::vector<std::string>& args, const std::string& message) {
  CAPTURE(message);
  const run_result r = run(args);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "remat-zoo: " + message + "\nTry 'remat-zoo --help' for more information.\n");
}

}  // namespace

TEST_CASE("remat-zoo writes the zoo's chain with its FLOPs" * doctest::skip(no_tool)) {
  SUBCASE("defaults, on stdout") {
    const run_result r = run({"resnet50"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    check_matches(r.out, remat::zoo::build("resnet50"));
    CHECK(r.out.find("transfer") == std::string::npos);
  }
  SUBCASE("every option") {
    const run_result r = run({"vgg16", "--batch", "3", "--image", "64", "--dtype", "fp16",
                              "--peak-flops", "1.5e14", "--bandwidth", "9e11"});
    CHECK(r.status == 0);
    remat::zoo::options o;
    o.batch = 3;
    o.image_size = 64;
    o.dtype = remat::zoo::dtype::fp16;
    o.peak_flops = 1.5e14;
    o.bandwidth = 9e11;
    check_matches(r.out, remat::zoo::build("vgg16", o));
  }
  SUBCASE("a transformer, into a file") {
    const fs::path file = scratch_dir() / "gpt2.json";
    const run_result r = run({"--seq", "256", "gpt2-small", "-o", file.string(), "--batch", "2"});
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
    remat::zoo::options o;
    o.batch = 2;
    o.sequence_length = 256;
    check_matches(slurp(file), remat::zoo::build("gpt2-small", o));
  }
  SUBCASE("GPT-2 at any depth, one stage per operator") {
    const run_result r = run({"gpt2-small", "--layers", "3", "--ops", "--seq", "128"});
    CHECK(r.status == 0);
    remat::zoo::options o;
    o.layers = 3;
    o.operators = true;
    o.sequence_length = 128;
    check_matches(r.out, remat::zoo::build("gpt2-small", o));
    CHECK(run({"gpt2-small", "--layers", "0"}).status == 2);
    CHECK(run({"resnet50", "--layers", "3"}).status == 2);
  }
  SUBCASE("a link to host memory: --pcie 4|5 or --transfer, in bytes per ms") {
    const auto with_transfer = [](double out, double in) {
      remat::zoo::network n = remat::zoo::build("resnet50");
      n.chain.transfer = {out, in};
      return n;
    };
    const run_result p5 = run({"resnet50", "--pcie", "5"});
    CHECK(p5.status == 0);
    CHECK(p5.err.empty());
    check_matches(p5.out, with_transfer(47e6, 55e6));
    const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(p5.out);
    CHECK(doc.at("zoo").at("pcie") == 5);
    std::vector<std::string> keys;
    for (const auto& item : doc.items()) keys.push_back(item.key());
    const auto at = [&](const char* key) {
      return std::find(keys.begin(), keys.end(), key) - keys.begin();
    };
    CHECK(at("transfer") == at("loss") + 1);

    const run_result p4 = run({"resnet50", "--pcie", "4"});
    check_matches(p4.out, with_transfer(25e6, 25e6));
    CHECK(nlohmann::json::parse(p4.out).at("zoo").at("pcie") == 4);

    // --transfer: the same syntax as remat-solve's --bandwidth; the file's units are ms, bytes.
    const run_result t = run({"resnet50", "--transfer", "47GB/s,55GB/s"});
    CHECK(t.status == 0);
    check_matches(t.out, with_transfer(47e6, 55e6));
    CHECK_FALSE(nlohmann::json::parse(t.out).at("zoo").contains("pcie"));
    check_matches(run({"resnet50", "--transfer", "25GiB/s"}).out,
                  with_transfer(25 * 0x1p30 / 1e3, 25 * 0x1p30 / 1e3));
    check_matches(run({"resnet50", "--transfer", "2.5e7,0"}).out, with_transfer(2.5e7, 0));
    // No link: the file without the flag, byte for byte.
    CHECK(run({"resnet50", "--transfer", "0"}).out == run({"resnet50"}).out);
  }
  SUBCASE("--help lists the models") {
    const run_result r = run({"--help"});
    CHECK(r.status == 0);
    CHECK(r.out.starts_with("usage: remat-zoo MODEL"));
    for (const std::string_view m : remat::zoo::model_names)
      CHECK(r.out.find(std::string(m)) != std::string::npos);
  }
}

TEST_CASE("the bundled zoo chains are what their README's commands write today" *
          doctest::skip(no_tool)) {
  // Each command line `BUILD/examples/tools/remat-zoo ARGS -o FILE` of the README is run with
  // FILE replaced by a scratch file, which must hold FILE's document.
  const fs::path root = REMAT_SOURCE_DIR;
  std::istringstream readme(slurp(root / "examples" / "chains" / "README.md"));
  const std::string prefix = "BUILD/examples/tools/remat-zoo ";
  std::set<std::string> generated;
  for (std::string line; std::getline(readme, line);) {
    if (!line.starts_with(prefix)) continue;
    CAPTURE(line);
    std::istringstream words(line.substr(prefix.size()));
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    REQUIRE(args.size() >= 3);
    REQUIRE(args[args.size() - 2] == "-o");
    const fs::path bundled = root / args.back();
    args.back() = (scratch_dir() / "bundled.json").string();
    const run_result r = run(args);
    CHECK(r.status == 0);
    CHECK(same_document(nlohmann::json::parse(slurp(args.back())),
                        nlohmann::json::parse(slurp(bundled))));
    generated.insert(bundled.filename().string());
  }
  // Every chain in the folder is either generated by a README command or the Rockmate copy.
  std::size_t chains = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(root / "examples" / "chains")) {
    if (e.path().extension() != ".json") continue;
    ++chains;
    const std::string file = e.path().filename().string();
    if (file != "resnet18-rockmate.json") CHECK_MESSAGE(generated.contains(file), file);
  }
  CHECK(generated.size() == 4);
  CHECK(chains == generated.size() + 1);
}

TEST_CASE("remat-zoo: bad arguments exit 2 with a message, nothing on stdout" *
          doctest::skip(no_tool)) {
  check_usage_error({}, "no model given");
  std::string known;
  for (const std::string_view m : remat::zoo::model_names)
    known += (known.empty() ? "" : ", ") + std::string(m);
  check_usage_error({"alexnet"}, "unknown model \"alexnet\" (known: " + known + ")");
  check_usage_error({"resnet50", "vgg16"}, "more than one model: \"resnet50\" and \"vgg16\"");
  check_usage_error({"resnet50", "--batch"}, "--batch: needs a value");
  check_usage_error({"resnet50", "--batch", "x2"}, "--batch: expected an integer, got \"x2\"");
  check_usage_error({"resnet50", "--batch", "0"}, "batch must be >= 1 (got 0)");
  check_usage_error({"resnet50", "--image", "16"}, "image size must be >= 32 (got 16)");
  check_usage_error({"resnet50", "--seq", "128"},
                    "resnet50 is a CNN: give an image size, not a sequence length");
  check_usage_error({"gpt2-xl", "--image", "224"},
                    "gpt2-xl is a transformer: give a sequence length, not an image size");
  check_usage_error({"resnet50", "--dtype", "int8"},
                    "--dtype: expected fp32, fp16 or bf16, got \"int8\"");
  check_usage_error({"resnet50", "--peak-flops", "fast"},
                    "--peak-flops: expected a number, got \"fast\"");
  check_usage_error({"resnet50", "--bandwidth", "-1"}, "bandwidth must be a finite number > 0");
  check_usage_error({"resnet50", "--frobnicate", "1"}, "unknown option --frobnicate");
  check_usage_error({"resnet50", "--pcie", "3"}, "--pcie: expected 4 or 5, got \"3\"");
  check_usage_error({"resnet50", "--pcie"}, "--pcie: needs a value");
  check_usage_error({"resnet50", "--pcie", "4", "--transfer", "25GB/s"},
                    "--pcie and --transfer exclude each other");
  check_usage_error({"resnet50", "--transfer", "1", "--transfer", "2"}, "--transfer: given twice");
  check_usage_error({"resnet50", "--transfer", "25GB"},
                    "--transfer '25GB': unknown unit 'GB' (use B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, "
                    "MiB/s, GiB/s or TiB/s; a number without a unit is in the chain's units)");
  check_usage_error({"resnet50", "--transfer", "-1"},
                    "--transfer '-1': must be a non-negative number with an optional unit per "
                    "second, or two as OUT,IN (e.g. 25GB/s, 47GB/s,55GB/s, 1.5e7, 0 for none)");
  check_usage_error({"resnet50", "--transfer", "1,2,3"},
                    "--transfer '1,2,3': give one rate, or two as OUT,IN");
  const run_result r = run({"resnet50", "-o", (scratch_dir() / "no" / "such" / "dir").string()});
  CHECK(r.status == 2);
  CHECK(r.err.starts_with("remat-zoo: cannot write "));
}

}  // namespace unit_tools_remat_zoo_test

// End-to-end tests of the remat-solve executable: golden outputs, exit statuses, every input
// error of chain-format.md, budget units, and the JSON form checked against the simulator.
#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::string exe = REMAT_SOLVE_EXE;
const fs::path data = fs::path(REMAT_SOURCE_DIR) / "tests" / "data";
const std::string tiny = (data / "chains" / "tiny-mlp.json").string();
const std::string resnet = (data / "chains" / "resnet18-rockmate.json").string();

struct run_result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs remat-solve with `args`, capturing its exit status, stdout and stderr.
// A directory for the captured output, removed at exit.
struct scratch_dir {
  fs::path path = fs::temp_directory_path() /
                  ("remat-solve-test-" + std::to_string(static_cast<long>(::getpid())));
  scratch_dir() { fs::create_directories(path); }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

run_result run(const std::vector<std::string>& args) {
  static const scratch_dir scratch;
  const fs::path& dir = scratch.path;
  std::string command = shell_quote(exe);
  for (const std::string& a : args) command += " " + shell_quote(a);
  command += " >" + shell_quote((dir / "out").string()) + " 2>" +
             shell_quote((dir / "err").string()) + " </dev/null";
  const int raw = std::system(command.c_str());
  run_result r;
  REQUIRE_MESSAGE(WIFEXITED(raw), "remat-solve did not exit normally: " << command);
  r.status = WEXITSTATUS(raw);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

nlohmann::json run_json(const std::vector<std::string>& args, int expected_status) {
  const run_result r = run(args);
  CHECK(r.status == expected_status);
  CHECK(r.err.empty());
  REQUIRE(r.out.ends_with("}\n"));
  REQUIRE(r.out.find('\n') == r.out.size() - 1);  // exactly one line
  return nlohmann::json::parse(r.out);
}

void check_usage_error(const std::vector<std::string>& args, const std::string& message) {
  const run_result r = run(args);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "remat-solve: " + message + "\nTry 'remat-solve --help' for more information.\n");
}

}  // namespace

TEST_SUITE("remat-solve" * doctest::skip(exe.empty())) {
  TEST_CASE("golden outputs, human and JSON, exact") {
    struct golden {
      std::vector<std::string> args;
      const char* file;
      int status;
    };
    const golden cases[] = {
        {{tiny, "--budget", "45MB"}, "tiny-mlp-45MB.txt", 0},
        {{tiny, "--budget", "45MB", "--json"}, "tiny-mlp-45MB.json", 0},
        {{tiny, "--budget", "30MB"}, "tiny-mlp-30MB.txt", 1},
        {{tiny, "--budget", "30MB", "--json"}, "tiny-mlp-30MB.json", 1},
        {{tiny, "--budget", "64MiB", "--solver", "store-all"}, "tiny-mlp-64MiB-store-all.txt", 0},
        {{resnet, "--budget", "720", "--slots", "exact"}, "resnet18-720-exact.txt", 0},
        {{(data / "chains" / "unnamed.json").string(), "--budget", "9", "--slots", "exact"},
         "unnamed-9-exact.txt",
         0},
    };
    for (const golden& g : cases) {
      const std::string file = g.file;
      CAPTURE(file);
      const run_result r = run(g.args);
      CHECK(r.status == g.status);
      CHECK(r.err.empty());
      const std::string expected = slurp(data / "tools" / g.file);
      REQUIRE(!expected.empty());
      CHECK(r.out == expected);
    }
  }

  TEST_CASE("every invalid chain file: exit 2, nothing on stdout, the message on stderr") {
    const fs::path dir = data / "chains" / "invalid";
    std::ifstream list(dir / "expected-errors.txt");
    int cases = 0;
    for (std::string line; std::getline(list, line);) {
      if (line.empty()) continue;
      ++cases;
      const std::string file = line.substr(0, line.find(": "));
      CAPTURE(file);
      const run_result r = run({(dir / file).string(), "--budget", "100"});
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(r.err == "remat-solve: " + (dir / line).string() + "\n");
    }
    CHECK(cases >= 30);
  }

  TEST_CASE("an infeasible budget: exit 1, feasible false, no ops, the budget that would fit") {
    const nlohmann::json j = run_json({resnet, "--budget", "702", "--slots", "exact", "--json"}, 1);
    CHECK(j["feasible"] == false);
    CHECK(j["budget"] == 702);
    CHECK(j["ops"].empty());
    CHECK(j["makespan"].is_null());
    CHECK(j["peak_memory"].is_null());
    CHECK(j["min_feasible_budget"] == 703);
    CHECK(j["store_all_memory"] == 747);

    // ... and that budget does fit.
    const nlohmann::json k = run_json({resnet, "--budget", "703", "--slots", "exact", "--json"}, 0);
    CHECK(k["feasible"] == true);
    CHECK(k["peak_memory"].get<long long>() <= 703);

    // The same holds with discretization: min_feasible_budget is always a budget that fits.
    const nlohmann::json d = run_json({tiny, "--budget", "1000", "--json"}, 1);
    const auto min_budget = d["min_feasible_budget"].get<long long>();
    CHECK(min_budget > 1000);
    const nlohmann::json e = run_json({tiny, "--budget", std::to_string(min_budget), "--json"}, 0);
    CHECK(e["feasible"] == true);
  }

  TEST_CASE("the JSON form: keys in order, and figures that the simulator confirms") {
    const nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(run({tiny, "--budget", "45MB", "--json"}).out);
    std::vector<std::string> keys;
    for (const auto& item : j.items()) keys.push_back(item.key());
    CHECK(keys == std::vector<std::string>{"solver", "feasible", "budget", "makespan",
                                           "peak_memory", "store_all_makespan", "store_all_memory",
                                           "min_feasible_budget", "ops"});

    const remat::io::chain_file f = remat::io::read_chain_file(tiny);
    std::vector<remat::op> ops;
    for (const auto& o : j["ops"]) {
      const std::string name = o["op"];
      if (name == "loss") {
        CHECK(!o.contains("stage"));
        ops.push_back(remat::loss_op(static_cast<std::int32_t>(f.chain.length())));
        continue;
      }
      const auto k = o["stage"].get<std::int32_t>();
      if (name == "F_none")
        ops.push_back(remat::f_none(k));
      else if (name == "F_ck")
        ops.push_back(remat::f_ck(k));
      else if (name == "F_all")
        ops.push_back(remat::f_all(k));
      else if (name == "B")
        ops.push_back(remat::backward(k));
      else
        FAIL("unknown op " << name);
    }
    const remat::replay_result r = remat::simulate(f.chain, std::span<const remat::op>(ops));
    REQUIRE(r.valid());
    CHECK(j["makespan"].get<double>() == r.makespan);
    CHECK(j["peak_memory"].get<long long>() == r.peak_memory);
    CHECK(r.peak_memory <= 45000000);

    const auto all = remat::store_all_ops(static_cast<std::int32_t>(f.chain.length()));
    const remat::replay_result s = remat::simulate(f.chain, std::span<const remat::op>(all));
    CHECK(j["store_all_makespan"].get<double>() == s.makespan);
    CHECK(j["store_all_memory"].get<long long>() == s.peak_memory);
  }

  TEST_CASE("budget units: B, KB, MB, GB (1000s) and KiB, MiB, GiB (1024s)") {
    const std::pair<const char*, long long> cases[] = {
        {"747", 747},
        {"747B", 747},
        {"1KB", 1000},
        {"1KiB", 1024},
        {"2MB", 2000000},
        {"2MiB", 2097152},
        {"3GB", 3000000000},
        {"3GiB", 3221225472},
        {"8589934591GiB", 9223372035781033984},
        {"9223372036854775807", 9223372036854775807},
    };
    for (const auto& c : cases) {
      const std::string text = c.first;
      CAPTURE(text);
      const nlohmann::json j =
          run_json({resnet, "--budget", text, "--slots", "exact", "--json"}, 0);
      CHECK(j["budget"].get<long long>() == c.second);
    }
    // The same budget written two ways gives the same answer.
    CHECK(run({tiny, "--budget", "45MB", "--json"}).out ==
          run({tiny, "--budget", "45000000", "--json"}).out);

    for (const char* bad : {"9223372036854775808", "8589934592GiB", "99999999999999999999GB"})
      check_usage_error(
          {resnet, "--budget", bad},
          std::string("--budget '") + bad + "': too large (the limit is 2^63 - 1 units)");
    for (const char* bad : {"", "-1", "+5", "1.5GB", "GB", " 5"})
      check_usage_error({resnet, "--budget", bad},
                        std::string("--budget '") + bad +
                            "': must be a non-negative integer with an optional unit (e.g. 800, "
                            "12GB, 1536MiB)");
    for (const char* bad : {"5 GB", "5gb", "5Kb", "5kB", "5MIB", "5TB", "5bytes", "0x10", "1e3"})
      check_usage_error({resnet, "--budget", bad},
                        std::string("--budget '") + bad + "': unknown unit '" +
                            std::string(bad).substr(1) + "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  }

  TEST_CASE("usage errors: exit 2, nothing on stdout, what to fix on stderr") {
    check_usage_error({}, "no chain file given");
    check_usage_error({tiny}, "missing --budget SIZE (or --sweep, or --info)");
    check_usage_error({tiny, "--budget"}, "--budget needs a value");
    check_usage_error({tiny, "--budget", "5", "--budget", "6"}, "--budget is given twice");
    check_usage_error({tiny, "--budget", "5", "--frobnicate"}, "unknown option '--frobnicate'");
    check_usage_error({tiny, "-x", "--budget", "5"}, "unknown option '-x'");
    check_usage_error({tiny, tiny, "--budget", "5"},
                      "one chain file expected, got '" + tiny + "' and '" + tiny + "'");
    check_usage_error(
        {tiny, "--budget", "5", "--solver", "fastest"},
        "unknown solver 'fastest' (known: optimal, store-all, exhaustive" +
            [] {
              std::string rest;
              for (std::size_t k = 3; k < std::size(remat::all_solvers); ++k)
                rest += ", " + std::string(remat::name(remat::all_solvers[k]));
              return rest;
            }() +
            ")");
    check_usage_error({tiny, "--budget", "5", "--solver", "optimal,store-all"},
                      "--solver takes one name (a list is for --sweep)");
    check_usage_error({tiny, "--budget", "5", "--slots", "0"},
                      "--slots '0': must be a positive integer or 'exact'");
    check_usage_error({tiny, "--budget", "5", "--slots", "many"},
                      "--slots 'many': must be a positive integer or 'exact'");
    check_usage_error({tiny, "--budget", "5", "--json=yes"}, "--json takes no value");
    check_usage_error({tiny, "--budget", "5", "--sweep"},
                      "--budget, --sweep and --info exclude each other");
    check_usage_error({tiny, "--budget", "5", "--points", "10"},
                      "--points applies only to --sweep");
    check_usage_error({tiny, "--budget", "5", "--csv", "out.csv"}, "--csv applies only to --sweep");
    check_usage_error({tiny, "--info", "--json"}, "--json does not apply to --info");
    check_usage_error({tiny, "--sweep", "--points", "-3"},
                      "--points '-3': must be a positive integer");

    // `--opt=value` is the same as `--opt value`; `--` ends the options.
    CHECK(run({tiny, "--budget=45MB", "--json"}).out ==
          run({tiny, "--budget", "45MB", "--json"}).out);
    CHECK(run({"--budget", "45MB", "--json", "--", tiny}).status == 0);
  }

  TEST_CASE("--sweep and --info are accepted but say they are not implemented") {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{tiny, "--sweep"},
          std::vector<std::string>{tiny, "--sweep", "--points", "20", "--solver",
                                   "optimal,store-all", "--csv", "x.csv", "--plot", "x.svg"},
          std::vector<std::string>{tiny, "--info"}}) {
      const run_result r = run(args);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(r.err == std::string("remat-solve: ") + (args[1] == "--info" ? "--info" : "--sweep") +
                         " is not implemented yet\n");
    }
  }

  TEST_CASE("a solver that refuses the request: exit 2 with its reason") {
    const run_result r = run({resnet, "--budget", "800", "--solver", "exhaustive"});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "remat-solve: exhaustive: the chain has 13 stages; the search over all op sequences is "
          "limited to 7 (use the optimal solver)\n");
    // A DP table beyond any memory limit (petabytes in exact units) is refused, not attempted.
    const std::string petabyte = (data / "chains" / "petabyte.json").string();
    const run_result u = run({petabyte, "--budget", "10000000000000000", "--slots", "exact"});
    CHECK(u.status == 2);
    CHECK(u.out.empty());
    CHECK(u.err.starts_with("remat-solve: optimal: the DP table for 3 stages"));
    // With the default slots the same request is easy.
    CHECK(run({petabyte, "--budget", "10000000000000000"}).status == 0);
  }

  TEST_CASE("unreadable files: exit 2 naming the file") {
    const run_result r = run({(data / "no-such-file.json").string(), "--budget", "5"});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "remat-solve: " + (data / "no-such-file.json").string() +
                       ": cannot open: No such file or directory\n");
    const run_result d = run({data.string(), "--budget", "5"});
    CHECK(d.status == 2);
    CHECK(d.err == "remat-solve: " + data.string() + ": cannot open: is a directory\n");
  }

  TEST_CASE("--help lists every solver the library has, and exits 0") {
    const run_result r = run({"--help"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.starts_with("usage: remat-solve CHAIN.json --budget SIZE"));
    for (const remat::solver s : remat::all_solvers)
      CHECK(r.out.find(std::string(remat::name(s))) != std::string::npos);
  }

  TEST_CASE("every solver runs from the command line and returns a schedule that replays") {
    const remat::io::chain_file f = remat::io::read_chain_file(tiny);
    for (const remat::solver s : remat::all_solvers) {
      const std::string name(remat::name(s));
      CAPTURE(name);
      // The store-all peak fits every solver's schedule.
      const nlohmann::json j =
          run_json({tiny, "--budget", "56080000", "--solver", name, "--json"}, 0);
      CHECK(j["solver"] == name);
      CHECK(j["feasible"] == true);
      CHECK(j["peak_memory"].get<long long>() <= 56080000);
      CHECK(j["makespan"].get<double>() >= j["store_all_makespan"].get<double>());
      CHECK(j["ops"].size() >= 2 * f.chain.length() + 1);
    }
  }
}

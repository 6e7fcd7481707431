// In-process tests of remat-solve's parser and command (examples/tools/solve_command.hpp):
// what each argument becomes, and that no argument list makes the command do anything but
// answer 0, 1 or 2 (with stdout empty on 2).
#include "solve_command.hpp"

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace unit_tools_solve_command_test {

namespace {

using remat::tools::command;
using remat::tools::parse_arguments;
using remat::tools::parse_size;
using remat::tools::usage_error;

remat::tools::solve_request parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  return parse_arguments(v);
}

const std::string tiny = std::string(REMAT_SOURCE_DIR) + "/tests/data/chains/tiny-mlp.json";

}  // namespace

TEST_CASE("parse_size: integers with decimal and binary units") {
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("800") == 800);
  CHECK(parse_size("800B") == 800);
  CHECK(parse_size("12KB") == 12000);
  CHECK(parse_size("12MB") == 12000000);
  CHECK(parse_size("12GB") == 12000000000);
  CHECK(parse_size("3KiB") == 3072);
  CHECK(parse_size("1536MiB") == 1610612736);
  CHECK(parse_size("2GiB") == 2147483648);
  CHECK(parse_size("007") == 7);
  CHECK(parse_size("9223372036854775807") == 9223372036854775807);
  CHECK(parse_size("8589934591GiB") == 8589934591 * 1073741824LL);
  for (const char* bad :
       {"", "B", "-1", "+1", "1.0", "1,000", "9223372036854775808", "8589934592GiB",
        "9223372036854775807B0", "1 GB", "1gb", "1TB", "99999999999999999999999999"})
    CHECK_THROWS_AS(parse_size(bad), usage_error);
}

TEST_CASE("parse_arguments: what each option becomes") {
  const auto r = parse(
      {"chain.json", "--budget", "4KiB", "--solver", "store-all", "--slots", "exact", "--json"});
  CHECK(r.what == command::solve);
  CHECK(r.chain_path == "chain.json");
  CHECK(r.budget == 4096);
  CHECK(r.solvers == std::vector<remat::solver>{remat::solver::store_all});
  CHECK(r.slots == remat::exact_units);
  CHECK(r.json);

  const auto d = parse({"--budget=10", "c.json"});
  CHECK(d.budget == 10);
  CHECK(d.solvers.empty());
  CHECK(d.slots == remat::default_slots);
  CHECK(!d.json);

  CHECK(parse({"c.json", "--budget", "1", "--slots", "64"}).slots == 64);
  CHECK(parse({"c.json", "--budget", "1", "--help"}).what == command::help);
  CHECK(parse({"-h"}).what == command::help);

  const auto s = parse({"c.json", "--sweep", "--points", "40", "--solver", "optimal,store-all",
                        "--csv", "a.csv", "--plot", "a.svg"});
  CHECK(s.what == command::sweep);
  CHECK(s.points == 40);
  CHECK(s.solvers.size() == 2);
  CHECK(s.csv == "a.csv");
  CHECK(s.plot == "a.svg");
  CHECK(parse({"c.json", "--info"}).what == command::info);

  // Every solver the library lists is accepted by its name.
  for (const remat::solver solver : remat::all_solvers) {
    const std::string_view n = remat::name(solver);
    const std::vector<std::string_view> args{"c.json", "--budget", "1", "--solver", n};
    CHECK(parse_arguments(args).solvers.front() == solver);
  }
}

TEST_CASE("parse_arguments: `--` ends the options") {
  const auto r = parse({"--budget", "5", "--", "--weird-name.json"});
  CHECK(r.chain_path == "--weird-name.json");
  CHECK_THROWS_AS(parse({"--budget", "5", "--"}), usage_error);
}

TEST_CASE("run_solve: help, a result, and an error, on the given streams") {
  std::ostringstream out, err;
  const std::vector<std::string_view> help{"--help"};
  CHECK(remat::tools::run_solve(help, out, err) == 0);
  CHECK(out.str().starts_with("usage: "));
  CHECK(err.str().empty());

  out.str("");
  const std::vector<std::string_view> solve{tiny, "--budget", "45MB", "--json"};
  CHECK(remat::tools::run_solve(solve, out, err) == 0);
  CHECK(out.str().starts_with("{\"solver\":\"optimal\",\"feasible\":true,\"budget\":45000000,"));

  out.str("");
  const std::vector<std::string_view> bad{tiny, "--budget", "45XB"};
  CHECK(remat::tools::run_solve(bad, out, err) == 2);
  CHECK(out.str().empty());
  CHECK(err.str().starts_with("remat-solve: --budget '45XB': unknown unit 'XB'"));
}

TEST_CASE("--coarsen N|auto: fine-stage ops, and the report says what was merged") {
  CHECK(parse({"c.json", "--budget", "1", "--coarsen", "7"}).coarsen == 7);
  CHECK(parse({"c.json", "--budget", "1", "--coarsen=auto"}).coarsen == remat::auto_coarsening);
  CHECK(parse({"c.json", "--budget", "1"}).coarsen == remat::no_coarsening);
  for (const std::string_view bad : {"0", "-3", "x", "", "auto2"})
    CHECK_THROWS_WITH_AS(parse({"c.json", "--budget", "1", "--coarsen", bad}),
                         doctest::Contains("must be a positive integer or 'auto'"), usage_error);
  CHECK_THROWS_WITH_AS(parse({"c.json", "--sweep", "--coarsen", "3"}),
                       "--coarsen applies only to --budget", usage_error);

  // tiny-mlp has 5 stages: 2 blocks.
  std::ostringstream out, err;
  const std::vector<std::string_view> json{tiny, "--budget", "45MB", "--coarsen", "2", "--json"};
  CHECK(remat::tools::run_solve(json, out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  CHECK(j["coarse_length"] == 2);
  CHECK(j["largest_block"] == 3);
  std::vector<remat::op> ops;
  for (const auto& o : j["ops"]) {
    const auto kind = o["op"].get<std::string>();
    for (const remat::op_kind k :
         {remat::op_kind::forward_none, remat::op_kind::forward_checkpoint,
          remat::op_kind::forward_all, remat::op_kind::loss, remat::op_kind::backward})
      if (remat::name(k) == kind) ops.push_back({k, o.value("stage", 5)});
  }
  const remat::io::chain_file f = remat::io::read_chain_file(tiny);
  const remat::replay_result r = remat::simulate(f.chain, std::span<const remat::op>(ops));
  CHECK(r.fits(45000000));
  CHECK(r.makespan == j["makespan"].get<double>());

  out.str("");
  const std::vector<std::string_view> report{tiny, "--budget", "45MB", "--coarsen", "2"};
  CHECK(remat::tools::run_solve(report, out, err) == 0);
  CHECK(
      out.str().find("coarsened  5 stages merged into 2 blocks of up to 3 stages (--coarsen 2)") !=
      std::string::npos);
  out.str("");
  const std::vector<std::string_view> as_given{tiny, "--budget", "45MB", "--coarsen", "auto"};
  CHECK(remat::tools::run_solve(as_given, out, err) == 0);
  CHECK(out.str().find("coarsened  no: optimal accepts the chain as given (--coarsen auto)") !=
        std::string::npos);
  // Without --coarsen, the contract's keys only.
  out.str("");
  const std::vector<std::string_view> plain{tiny, "--budget", "45MB", "--json"};
  CHECK(remat::tools::run_solve(plain, out, err) == 0);
  CHECK(out.str().find("coarse_length") == std::string::npos);
}

TEST_CASE("run_solve: random argument lists answer 0, 1 or 2, and 2 leaves stdout empty") {
  const std::vector<std::string> pool = {tiny,
                                         "x.json",
                                         "--budget",
                                         "--budget=",
                                         "45MB",
                                         "0",
                                         "1",
                                         "40000000",
                                         "--solver",
                                         "optimal",
                                         "store-all",
                                         "exhaustive",
                                         "nope",
                                         "optimal,store-all",
                                         ",",
                                         "--slots",
                                         "exact",
                                         "7",
                                         "0",
                                         "--json",
                                         "--json=1",
                                         "--sweep",
                                         "--info",
                                         "--points",
                                         "--csv",
                                         "--plot",
                                         "--",
                                         "-",
                                         "-h",
                                         "--he",
                                         "",
                                         "=",
                                         "--=",
                                         "9223372036854775807",
                                         "18446744073709551616GiB",
                                         "1KiB"};
  std::mt19937_64 rng(11);
  int answered[3] = {0, 0, 0};
  for (int n = 0; n < 3000; ++n) {
    std::vector<std::string_view> args;
    if (rng() % 2 == 0) {  // a valid request, then random additions
      static const std::string_view budgets[] = {"45MB", "30MB", "56080000", "1KiB", "0"};
      args = {tiny, "--budget", budgets[rng() % std::size(budgets)]};
    }
    const auto count = rng() % 5;
    for (std::size_t k = 0; k < count; ++k) args.push_back(pool[rng() % pool.size()]);
    std::ostringstream out, err;
    const int status = remat::tools::run_solve(args, out, err);
    REQUIRE(status >= 0);
    REQUIRE(status <= 2);
    ++answered[status];
    if (status == 2) {
      CHECK(out.str().empty());
      CHECK(err.str().starts_with("remat-solve: "));
    } else {
      CHECK(!out.str().empty());
      CHECK(err.str().empty());
    }
  }
  // The seed is fixed: these show the lists reach the solver, not only the parser.
  CHECK(answered[0] > 0);
  CHECK(answered[1] > 0);
  CHECK(answered[2] > 0);
}

TEST_CASE("stage_requirement (--info): no schedule at all fits below it, and store-all meets it") {
  // The exhaustive search's least budget is the least over every op sequence.
  std::mt19937_64 rng(5);
  for (int n = 0; n < 300; ++n) {
    const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 5});
    INFO(remat::testing::chain_text(c));
    remat::size_type largest = 0;
    for (std::size_t k = 0; k <= c.length(); ++k)
      largest = std::max(largest, remat::tools::stage_requirement(c, k));
    const remat::size_type least = remat::solve_exhaustive(c, 0).min_feasible_budget;
    CHECK(largest <= least);
    // On a one-stage chain with a free loss it is exactly the store-all peak.
    if (c.length() == 1 && c.loss_overhead == 0) {
      const auto all = remat::store_all_ops(1);
      CHECK(remat::tools::stage_requirement(c, 0) ==
            remat::simulate(c, std::span<const remat::op>(all)).peak_memory);
    }
  }
}

TEST_CASE("--frontier: the curve of trade_off, text and JSON") {
  const std::string_view args[] = {"chain.json", "--frontier", "--json"};
  const remat::tools::solve_request req = parse_arguments(args);
  CHECK(req.what == remat::tools::command::frontier);
  CHECK(req.json);
  const std::string_view both[] = {"chain.json", "--frontier", "--info"};
  CHECK_THROWS_AS((void)parse_arguments(both), remat::tools::usage_error);
}

}  // namespace unit_tools_solve_command_test

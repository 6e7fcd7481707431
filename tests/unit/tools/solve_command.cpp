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
      const auto all = remat::detail::store_all_ops(1);
      CHECK(remat::tools::stage_requirement(c, 0) ==
            remat::simulate(c, std::span<const remat::op>(all)).peak_memory);
    }
  }
}

TEST_CASE("--bandwidth: parsed with the request, applied once the chain's units are known") {
  const auto r = parse({"c.json", "--budget", "1", "--bandwidth", "47GB/s,55GB/s"});
  REQUIRE(r.bandwidth.has_value());
  CHECK(r.bandwidth->offload.value == 47e9);
  CHECK(r.bandwidth->prefetch.value == 55e9);
  CHECK(r.bandwidth->offload.per_second);
  CHECK_FALSE(parse({"c.json", "--budget", "1"}).bandwidth.has_value());
  CHECK(parse({"c.json", "--info", "--bandwidth=0"}).bandwidth->offload.value == 0);
  CHECK(parse({"c.json", "--sweep", "--bandwidth", "25GB/s"}).bandwidth.has_value());
  CHECK_THROWS_WITH_AS(parse({"c.json", "--budget", "1", "--bandwidth", "25XB/s"}),
                       doctest::Contains("--bandwidth '25XB/s': unknown unit 'XB/s'"), usage_error);
  CHECK_THROWS_WITH_AS(parse({"c.json", "--frontier", "--bandwidth", "25GB/s"}),
                       "--bandwidth does not apply to --frontier", usage_error);
  CHECK_THROWS_WITH_AS(parse({"c.json", "--budget", "1", "--bandwidth", "1", "--bandwidth", "2"}),
                       "--bandwidth is given twice", usage_error);
  CHECK_THROWS_WITH_AS(parse({"c.json", "--budget", "1", "--bandwidth"}),
                       "--bandwidth needs a value", usage_error);

  // On tiny-mlp (ms, bytes) 25GB/s is 25000000 bytes per ms.
  std::ostringstream out, err;
  const std::vector<std::string_view> info{tiny, "--info", "--json", "--bandwidth", "25GB/s"};
  CHECK(remat::tools::run_solve(info, out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  CHECK(j["transfer"]["offload_bandwidth"] == 25e6);
  CHECK(j["transfer"]["prefetch_bandwidth"] == 25e6);
  // The rockmate chain is in slots: a rate per second is refused there, a bare number is not.
  const std::string slots =
      std::string(REMAT_SOURCE_DIR) + "/tests/data/chains/resnet18-rockmate.json";
  out.str("");
  const std::vector<std::string_view> refused{slots, "--info", "--bandwidth", "25GB/s"};
  CHECK(remat::tools::run_solve(refused, out, err) == 2);
  CHECK(out.str().empty());
  CHECK(err.str().starts_with(
      "remat-solve: --bandwidth '25GB/s': the chain's units (time 'ms', memory 'slots') are not "
      "seconds and bytes"));
  CHECK(err.str().ends_with("\nTry 'remat-solve --help' for more information.\n"));
  err.str("");
  const std::vector<std::string_view> bare{slots, "--info", "--json", "--bandwidth", "4,2"};
  CHECK(remat::tools::run_solve(bare, out, err) == 0);
  CHECK(err.str().empty());
  const nlohmann::json b = nlohmann::json::parse(out.str());
  CHECK(b["transfer"]["offload_bandwidth"] == 4);
  CHECK(b["transfer"]["prefetch_bandwidth"] == 2);
}

namespace {

// docs/offload.md's chain A: L = 2, x = [5, 1, 1], xb = [-, 1, 1], fw = [4, 4], bw = [4, 8], a
// loss of time 1 and overhead 20, both bandwidths 5/4.
remat::io::chain_file offload_chain_a() {
  remat::io::chain_file f;
  f.chain.input_size = 5;
  f.chain.stages = {{4, 4, 1, 1, 0, 0}, {4, 8, 1, 1, 0, 0}};
  f.chain.loss_time = 1;
  f.chain.loss_overhead = 20;
  f.chain.transfer = {1.25, 1.25};
  f.name = "chain-a";
  return f;
}

// The report of `ops` as a solve of `f` at `budget` would give it.
remat::tools::solve_report report_of(const remat::io::chain_file& f, std::vector<remat::op> ops,
                                     remat::size_type budget) {
  remat::tools::solve_report rep;
  rep.file = &f;
  rep.result.feasible = true;
  rep.result.budget = budget;
  rep.result.min_feasible_budget = budget;
  rep.result.schedule.ops = std::move(ops);
  rep.replayed = remat::simulate(f.chain, std::span<const remat::op>(rep.result.schedule.ops));
  const auto all = remat::detail::store_all_ops(static_cast<std::int32_t>(f.chain.length()));
  rep.store_all = remat::simulate(f.chain, std::span<const remat::op>(all));
  return rep;
}

}  // namespace

TEST_CASE("transfer ops: {op, tensor, index} in --json, O(k,a) in the report, not recomputations") {
  using remat::tensor_kind;
  const remat::io::chain_file f = offload_chain_a();
  // docs/offload.md's example: a_0 offloaded during F_all(0), prefetched during B(1).
  const remat::tools::solve_report a =
      report_of(f,
                {remat::f_all(0), remat::offload(0), remat::f_all(1), remat::loss_op(2),
                 remat::backward(1), remat::prefetch(0), remat::backward(0)},
                23);
  REQUIRE(a.replayed.valid());
  CHECK(a.replayed.makespan == 21);
  CHECK(a.replayed.peak_memory == 23);
  const nlohmann::json j = nlohmann::json::parse(remat::tools::format_json(a));
  CHECK(j["makespan"] == 21.0);
  CHECK(j["peak_memory"] == 23);
  CHECK(j["ops"] ==
        nlohmann::json::parse(
            R"([{"op": "F_all", "stage": 0}, {"op": "offload", "tensor": "a", "index": 0},
                            {"op": "F_all", "stage": 1}, {"op": "loss"}, {"op": "B", "stage": 1},
                            {"op": "prefetch", "tensor": "a", "index": 0}, {"op": "B", "stage": 0}])"));
  const std::string text = remat::tools::format_report(a);
  CHECK(text.find("\ntransfer   1.25 memory units per time unit each way\n") != std::string::npos);
  CHECK(text.find("\nrecomputes nothing\n") != std::string::npos);
  CHECK(text.find("\ntransfers  1 offload (5), 1 prefetch (5), 0 waits\n") != std::string::npos);
  CHECK(text.find("\n  F_all(0) O(0,a) F_all(1) loss B(1) P(0,a) B(0)\n") != std::string::npos);

  // A tape, moved out and back before the forward that reads it, and a wait; the last stage's
  // tape index is L, past the stages.
  const remat::tools::solve_report t = report_of(
      f,
      {remat::f_all(0), remat::offload(1, tensor_kind::tape), remat::wait_for(1, tensor_kind::tape),
       remat::prefetch(1, tensor_kind::tape), remat::f_all(1), remat::offload(2, tensor_kind::tape),
       remat::prefetch(2, tensor_kind::tape), remat::loss_op(2), remat::backward(1),
       remat::backward(0)},
      30);
  REQUIRE(t.replayed.valid());
  const nlohmann::json k = nlohmann::json::parse(remat::tools::format_json(t));
  CHECK(k["ops"][1] == nlohmann::json::parse(R"({"op": "offload", "tensor": "t", "index": 1})"));
  CHECK(k["ops"][2] == nlohmann::json::parse(R"({"op": "wait", "tensor": "t", "index": 1})"));
  CHECK(k["ops"][3] == nlohmann::json::parse(R"({"op": "prefetch", "tensor": "t", "index": 1})"));
  CHECK(k["ops"][5] == nlohmann::json::parse(R"({"op": "offload", "tensor": "t", "index": 2})"));
  CHECK(k["makespan"].get<double>() == t.replayed.makespan);
  const std::string tape_text = remat::tools::format_report(t);
  CHECK(tape_text.find("\nrecomputes nothing\n") != std::string::npos);
  CHECK(tape_text.find("\ntransfers  2 offloads (2), 2 prefetches (2), 1 wait\n") !=
        std::string::npos);
  CHECK(tape_text.find("F_all(0) O(1,t) W(1,t) P(1,t) F_all(1) O(2,t) P(2,t) loss") !=
        std::string::npos);

  // Compute ops keep their form, and a chain with bytes and ms shows its rate in GB/s too.
  remat::io::chain_file g = f;
  g.time_unit = "ms";
  g.memory_unit = "bytes";
  g.chain.transfer = {47e6, 55e6};
  const std::string g_text =
      remat::tools::format_report(report_of(g, remat::detail::store_all_ops(2), 30));
  CHECK(g_text.find("\ntransfer   offload 47000000 bytes/ms (47 GB/s), prefetch 55000000 "
                    "bytes/ms (55 GB/s)\n") != std::string::npos);
  CHECK(g_text.find("transfers") == std::string::npos);
}

TEST_CASE("--info with a transfer rate: each stage's transfers against the compute beside them") {
  remat::io::chain_file f = offload_chain_a();
  const remat::tools::solve_request req = parse({"a.json", "--info"});
  const remat::tools::info_report rep = remat::tools::compute_info(f, req);
  REQUIRE(rep.transfers.size() == 2);
  // Stage 0: a_0 (5) moves in 4 beside F(0) (4) and B(1) (8); t_1 (1) in 0.8 beside F(1), B(1).
  const remat::tools::stage_transfer& s0 = rep.transfers[0];
  CHECK(s0.input_size == 5);
  CHECK(s0.tape_size == 1);
  CHECK(s0.input_offload.transfer == 4);
  CHECK(s0.input_offload.compute == 4);
  CHECK(s0.input_offload.hidden() == 1);
  CHECK(s0.input_prefetch.compute == 8);
  CHECK(s0.tape_offload.transfer == 0.8);
  CHECK(s0.tape_offload.compute == 4);
  CHECK(s0.tape_prefetch.compute == 8);
  // Stage 1, the last: the loss (time 1) stands in for stage 2; t_2 (1) takes 0.8, a_1 too.
  const remat::tools::stage_transfer& s1 = rep.transfers[1];
  CHECK(s1.input_offload.compute == 4);
  CHECK(s1.tape_offload.compute == 1);
  CHECK(s1.input_prefetch.compute == 1);
  CHECK(s1.tape_prefetch.hidden() == 1);

  // A slow link: 1/4, a_0 takes 20 to move, 4 of which F(0) hides.
  f.chain.transfer = {0.25, 0};
  const remat::tools::info_report slow = remat::tools::compute_info(f, req);
  CHECK(slow.transfers[0].input_offload.hidden() == 0.2);
  CHECK_FALSE(slow.transfers[0].input_prefetch.available);
  // Over the chain: inputs 4 + 4 hidden of 20 + 4, tapes 4 + 1 (the loss) of 4 + 4.
  CHECK(remat::tools::hidden_share(slow.transfers, &remat::tools::stage_transfer::input_offload) ==
        doctest::Approx(8.0 / 24.0));
  CHECK(remat::tools::hidden_share(slow.transfers, &remat::tools::stage_transfer::tape_offload) ==
        doctest::Approx(5.0 / 8.0));
  CHECK_FALSE(
      remat::tools::hidden_share(slow.transfers, &remat::tools::stage_transfer::tape_prefetch));
  const std::string text = remat::tools::format_info(slow);
  CHECK(text.find("\ntransfer       offload 0.25 memory units per time unit, prefetch none\n") !=
        std::string::npos);
  CHECK(text.find("\nhidden         input: offload 33.3%, prefetch none; tape: offload 62.5%, "
                  "prefetch none\n") != std::string::npos);
  CHECK(text.find("\nstage         input   offload  prefetch           tape   offload  prefetch\n"
                  "0                 5     20.0%         -              1    100.0%         -\n"
                  "1                 1    100.0%         -              1     25.0%         -\n") !=
        std::string::npos);
  const nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(remat::tools::format_info_json(slow));
  CHECK(j["transfer"] == nlohmann::ordered_json::parse(
                             R"({"offload_bandwidth": 0.25, "prefetch_bandwidth": 0.0,
                                 "input_offload_hidden": 0.3333333333333333,
                                 "input_prefetch_hidden": null, "tape_offload_hidden": 0.625,
                                 "tape_prefetch_hidden": null,
                                 "min_feasible_budget_offload": null})"));
  CHECK(j["transfer_stages"][0] == nlohmann::ordered_json::parse(
                                       R"({"stage": 0, "input_size": 5, "input_offload_time": 20.0,
                                           "input_offload_hidden": 0.2, "input_prefetch_time": null,
                                           "input_prefetch_hidden": null, "tape_size": 1,
                                           "tape_offload_time": 4.0, "tape_offload_hidden": 1.0,
                                           "tape_prefetch_time": null,
                                           "tape_prefetch_hidden": null})"));

  // Without a link, --info says nothing of transfers.
  f.chain.transfer = {};
  const remat::tools::info_report none = remat::tools::compute_info(f, req);
  CHECK(none.transfers.empty());
  CHECK(remat::tools::format_info(none).find("transfer") == std::string::npos);
  CHECK(remat::tools::format_info_json(none).find("transfer") == std::string::npos);
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

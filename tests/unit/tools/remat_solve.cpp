// End-to-end tests of the remat-solve executable: golden outputs, exit statuses, every input
// error of chain-format.md, budget units, and the JSON form checked against the simulator.
#include <remat/io/chain_json.hpp>
#include <remat/io/schedule_json.hpp>
#include <remat/pipeline.hpp>
#include <remat/solve.hpp>
#include <remat/trade_off.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <run_tool.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace unit_tools_remat_solve_test {

namespace {

namespace fs = std::filesystem;

const std::string exe = REMAT_SOLVE_EXE;
const fs::path data = fs::path(REMAT_SOURCE_DIR) / "tests" / "data";
const std::string tiny = (data / "chains" / "tiny-mlp.json").string();
const std::string resnet = (data / "chains" / "resnet18-rockmate.json").string();
// A chain whose curve has many more points than a sweep has budgets.
const std::string resnet101 =
    (fs::path(REMAT_SOURCE_DIR) / "examples" / "chains" / "resnet101-b32-224-fp32.json").string();

using remat::testing::run_result;
using remat::testing::scratch_dir;
using remat::testing::shell_quote;
using remat::testing::slurp;

run_result run(const std::vector<std::string>& args) {
  return remat::testing::run_tool(exe, args);
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

// The ops of a --json result, compute ops and docs/offload.md's transfers.
std::vector<remat::op> ops_of(const nlohmann::json& j, std::size_t length) {
  std::vector<remat::op> ops;
  for (const auto& o : j["ops"]) {
    const std::string name = o["op"];
    if (name == "loss") {
      CHECK(!o.contains("stage"));
      ops.push_back(remat::loss_op(static_cast<std::int32_t>(length)));
      continue;
    }
    if (name == "offload" || name == "prefetch" || name == "wait") {
      CHECK(o.size() == 3);
      const auto k = o["index"].get<std::int32_t>();
      const std::string tensor = o["tensor"];
      CHECK((tensor == "a" || tensor == "t"));
      const auto t = tensor == "t" ? remat::tensor_kind::tape : remat::tensor_kind::activation;
      ops.push_back(name == "offload"    ? remat::offload(k, t)
                    : name == "prefetch" ? remat::prefetch(k, t)
                                         : remat::wait_for(k, t));
      continue;
    }
    // F_all(k, o) with o > 0 names its option; option 0 is left out.
    const bool named = name == "F_all" && o.contains("option");
    CHECK(o.size() == (named ? 3 : 2));
    if (named) CHECK(o["option"].get<int>() > 0);
    const auto k = o["stage"].get<std::int32_t>();
    if (name == "F_none")
      ops.push_back(remat::f_none(k));
    else if (name == "F_ck")
      ops.push_back(remat::f_ck(k));
    else if (name == "F_all")
      ops.push_back(remat::f_all(k, named ? o["option"].get<std::uint16_t>() : 0));
    else if (name == "B")
      ops.push_back(remat::backward(k));
    else
      FAIL("unknown op " << name);
  }
  // remat::io's reader (what a user's program reads a saved schedule with) reads the same.
  CHECK(remat::io::ops_from_json(j["ops"], static_cast<std::int32_t>(length)) == ops);
  return ops;
}

// %.6g, as remat-solve prints times.
std::string six_digits(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "" when `doc` is well-formed XML as remat-solve writes it (a declaration, one root element,
// elements properly nested, attributes quoted, only the five predefined entities), else what is
// wrong. No DTD, comments, CDATA or processing instructions besides the declaration.
std::string well_formed_xml(const std::string& doc) {
  std::vector<std::string> open;
  std::size_t i = 0;
  bool root_seen = false;
  const auto name_char = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' ||
           ch == ':' || ch == '.';
  };
  const auto entity_ok = [&](std::size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (doc.compare(at, std::strlen(e), e) == 0) return true;
    return false;
  };
  if (doc.starts_with("<?xml")) {
    i = doc.find("?>");
    if (i == std::string::npos) return "unterminated declaration";
    i += 2;
  }
  while (i < doc.size()) {
    if (doc[i] != '<') {
      if (doc[i] == '&' && !entity_ok(i)) return "bad entity at " + std::to_string(i);
      if (doc[i] == '>') return "stray '>' at " + std::to_string(i);
      if (open.empty() && std::isspace(static_cast<unsigned char>(doc[i])) == 0)
        return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    ++i;
    const bool closing = i < doc.size() && doc[i] == '/';
    if (closing) ++i;
    const std::size_t name_start = i;
    while (i < doc.size() && name_char(doc[i])) ++i;
    const std::string tag = doc.substr(name_start, i - name_start);
    if (tag.empty()) return "a tag without a name at " + std::to_string(name_start);
    if (closing) {
      if (open.empty() || open.back() != tag) return "</" + tag + "> closes nothing open";
      open.pop_back();
      if (i >= doc.size() || doc[i] != '>') return "bad closing tag </" + tag + ">";
      ++i;
      continue;
    }
    if (open.empty() && root_seen) return "a second root element <" + tag + ">";
    root_seen = true;
    std::vector<std::string> attributes;
    while (true) {
      while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i])) != 0) ++i;
      if (i >= doc.size()) return "unterminated tag <" + tag + ">";
      if (doc.compare(i, 2, "/>") == 0) {
        i += 2;
        break;
      }
      if (doc[i] == '>') {
        open.push_back(tag);
        ++i;
        break;
      }
      const std::size_t a = i;
      while (i < doc.size() && name_char(doc[i])) ++i;
      const std::string attribute = doc.substr(a, i - a);
      if (attribute.empty() || i + 1 >= doc.size() || doc[i] != '=' ||
          (doc[i + 1] != '"' && doc[i + 1] != '\''))
        return "bad attribute in <" + tag + "> at " + std::to_string(a);
      if (std::find(attributes.begin(), attributes.end(), attribute) != attributes.end())
        return "attribute " + attribute + " twice in <" + tag + ">";
      attributes.push_back(attribute);
      const char quote = doc[i + 1];
      const std::size_t end = doc.find(quote, i + 2);
      if (end == std::string::npos) return "unterminated attribute value in <" + tag + ">";
      for (std::size_t k = i + 2; k < end; ++k) {
        if (doc[k] == '<') return "'<' in an attribute value of <" + tag + ">";
        if (doc[k] == '&' && !entity_ok(k)) return "bad entity in <" + tag + ">";
      }
      i = end + 1;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!root_seen) return "no root element";
  return "";
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

  TEST_CASE("--in-flight K: the schedule keeps peak + (K - 1) x retained within the budget") {
    const remat::io::chain_file f = remat::io::read_chain_file(tiny);
    const remat::replay_result all = remat::simulate(
        f.chain, remat::detail::store_all_ops(static_cast<std::int32_t>(f.chain.length())));
    // Halfway from the least budget with 3 in flight to what store-all needs with them: store-all
    // does not fit, a schedule that retains less does.
    const long long least =
        remat::solve(f.chain, 0, {.slots = remat::exact_units, .in_flight = 3}).min_feasible_budget;
    const long long need = all.peak_memory + 2 * all.retained;
    REQUIRE(least < need);
    const std::string budget = std::to_string((least + need) / 2);
    const run_result r = run({tiny, "--budget", budget, "--in-flight", "3", "--json"});
    CHECK(r.status == 0);
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(r.out);
    const std::vector<remat::op> ops = ops_of(j, f.chain.length());
    const remat::replay_result replayed =
        remat::simulate(f.chain, std::span<const remat::op>(ops));
    REQUIRE(replayed.valid());
    CHECK(j["retained"].get<long long>() == replayed.retained);
    CHECK(j["in_flight"] == 3);
    CHECK(replayed.peak_memory + 2 * replayed.retained <= (least + need) / 2);
    CHECK(j["min_feasible_budget"].get<long long>() == least);
    // The report says what the budget must hold.
    const run_result text = run({tiny, "--budget", budget, "--in-flight", "3"});
    CHECK(text.out.find("with 3 micro-batches in flight, peak + 2 x retained") !=
          std::string::npos);
    // Store-all says the budget it would need; --info the least with K in flight.
    const run_result s = run({tiny, "--budget", budget, "--in-flight", "3", "--solver",
                              "store-all", "--json"});
    CHECK(s.status == 1);
    CHECK(nlohmann::ordered_json::parse(s.out)["min_feasible_budget"].get<long long>() == need);
    const nlohmann::ordered_json info =
        nlohmann::ordered_json::parse(run({tiny, "--info", "--in-flight", "3", "--json"}).out);
    CHECK(info["in_flight"] == 3);
    CHECK(info["min_feasible_budget_in_flight"] == j["min_feasible_budget"]);
    CHECK(info["store_all_retained"].get<long long>() == all.retained);
    // Refusals name what is wrong.
    CHECK(run({tiny, "--budget", budget, "--in-flight", "0"}).status == 2);
    CHECK(run({tiny, "--frontier", "--in-flight", "2"}).err.find("--in-flight") !=
          std::string::npos);
    const run_result offload = run({tiny, "--budget", budget, "--in-flight", "2", "--solver",
                                    "offload", "--bandwidth", "25GB/s"});
    CHECK(offload.status == 2);
    CHECK(offload.err.find("micro-batches in flight") != std::string::npos);
  }

  TEST_CASE("--pipeline P: each rank's ops keep its budget with its K; the split is the library's") {
    const remat::io::chain_file f = remat::io::read_chain_file(resnet);
    const std::vector<std::size_t> K =
        remat::micro_batches_in_flight(remat::pipeline_schedule::one_f_one_b, 3, 6);
    REQUIRE(K == std::vector<std::size_t>{3, 2, 1});
    const long long least = remat::split_pipeline(f.chain, 0, K).min_feasible_budget;
    REQUIRE(least > 0);
    const long long budget = least + least / 4;
    const std::string b = std::to_string(budget);
    const nlohmann::ordered_json j = run_json({resnet, "--budget", b, "--pipeline", "3", "--json"}, 0);
    CHECK(j["pipeline"] == 3);
    CHECK(j["schedule"] == "1f1b");
    CHECK(j["micro_batches"] == 6);  // 2P by default
    const remat::pipeline_result p = remat::split_pipeline(f.chain, budget, K);
    REQUIRE(j["ranks"].size() == 3);
    CHECK(j["slowest"].get<double>() == doctest::Approx(p.slowest));
    for (std::size_t r = 0; r < 3; ++r) {
      const auto& rank = j["ranks"][r];
      CHECK(rank["first"] == p.stages[r].first);
      CHECK(rank["in_flight"] == K[r]);
      const remat::chain sc =
          remat::stage_chain(f.chain, rank["first"].get<std::size_t>(), rank["end"].get<std::size_t>());
      const std::vector<remat::op> ops = ops_of(rank, sc.length());
      const remat::replay_result rr = remat::simulate(sc, std::span<const remat::op>(ops));
      REQUIRE(rr.valid());
      CHECK(rank["memory"].get<long long>() ==
            rr.peak_memory + static_cast<long long>(K[r] - 1) * rr.retained);
      CHECK(rank["memory"].get<long long>() <= budget);
    }
    CHECK(j["equal_split"]["starts"] == std::vector<std::size_t>{0, 5, 9});
    // Below the least budget: exit 1, the least budget per rank, the text says it.
    const nlohmann::ordered_json no = run_json(
        {resnet, "--budget", std::to_string(least - 1), "--pipeline", "3", "--json"}, 1);
    CHECK(no["feasible"] == false);
    CHECK(no["min_feasible_budget"].get<long long>() == least);
    const run_result text = run({resnet, "--budget", b, "--pipeline", "3", "--schedule", "gpipe",
                                 "--micro-batches", "2"});
    CHECK(text.status == 0);
    CHECK(text.out.find("3 ranks, gpipe, 2 micro-batches: 2, 2, 2 in flight") != std::string::npos);
    CHECK(text.out.find("every stage checkpointed") != std::string::npos);
    check_usage_error({resnet, "--budget", b, "--pipeline", "3", "--schedule", "zb"},
                      "--schedule 'zb': one of 1f1b, gpipe (schedules that split the backward "
                      "are not modelled)");
    // K for each rank as given (a schedule --schedule does not name): the library's split.
    const nlohmann::ordered_json given =
        run_json({resnet, "--budget", b, "--pipeline", "3", "--in-flight", "4,2,2", "--json"}, 0);
    const std::vector<std::size_t> own{4, 2, 2};
    CHECK(given["schedule"].is_null());
    CHECK(given["micro_batches"].is_null());
    CHECK(given["in_flight"] == own);
    CHECK(given["slowest"].get<double>() ==
          doctest::Approx(remat::split_pipeline(f.chain, budget, own).slowest));
    check_usage_error({resnet, "--budget", b, "--pipeline", "3", "--in-flight", "2"},
                      "--in-flight with --pipeline 3 lists each rank's K: 3 values, not 1");
    check_usage_error(
        {resnet, "--budget", b, "--pipeline", "2", "--in-flight", "2,1", "--schedule", "1f1b"},
        "--schedule and --in-flight K0,K1,... exclude each other (the list gives each rank's K "
        "itself)");
    check_usage_error({resnet, "--sweep", "--pipeline", "3"}, "--pipeline applies only to --budget");
    check_usage_error({resnet, "--budget", b, "--micro-batches", "3"},
                      "--micro-batches applies only to --pipeline P");
    const run_result many = run({resnet, "--budget", b, "--pipeline", "100"});
    CHECK(many.status == 2);
    CHECK(many.err.find("100 ranks over") != std::string::npos);
  }

  TEST_CASE("the JSON form: keys in order, and figures that the simulator confirms") {
    const nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(run({tiny, "--budget", "45MB", "--json"}).out);
    std::vector<std::string> keys;
    for (const auto& item : j.items()) keys.push_back(item.key());
    CHECK(keys == std::vector<std::string>{"solver", "feasible", "budget", "makespan",
                                           "peak_memory", "store_all_makespan", "store_all_memory",
                                           "min_feasible_budget", "ops", "retained"});

    const remat::io::chain_file f = remat::io::read_chain_file(tiny);
    const std::vector<remat::op> ops = ops_of(j, f.chain.length());
    const remat::replay_result r = remat::simulate(f.chain, std::span<const remat::op>(ops));
    REQUIRE(r.valid());
    CHECK(j["makespan"].get<double>() == r.makespan);
    CHECK(j["peak_memory"].get<long long>() == r.peak_memory);
    CHECK(r.peak_memory <= 45000000);

    const auto all = remat::detail::store_all_ops(static_cast<std::int32_t>(f.chain.length()));
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
    check_usage_error({tiny}, "missing --budget SIZE (or --sweep, --info or --frontier)");
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
                      "--slots '0': must be a positive integer or 'exact' or 'auto'");
    check_usage_error({tiny, "--budget", "5", "--slots", "many"},
                      "--slots 'many': must be a positive integer or 'exact' or 'auto'");
    check_usage_error({tiny, "--budget", "5", "--json=yes"}, "--json takes no value");
    check_usage_error({tiny, "--budget", "5", "--sweep"},
                      "--budget, --sweep, --info and --frontier exclude each other");
    check_usage_error({tiny, "--budget", "5", "--points", "10"},
                      "--points applies only to --sweep");
    check_usage_error({tiny, "--budget", "5", "--csv", "out.csv"}, "--csv applies only to --sweep");
    check_usage_error({tiny, "--info", "--solver", "optimal"}, "--solver does not apply to --info");
    check_usage_error({tiny, "--info", "--plot", "x.svg"}, "--plot applies only to --sweep");
    check_usage_error({tiny, "--sweep", "--json"},
                      "--json does not apply to --sweep (use --csv FILE)");
    check_usage_error({tiny, "--sweep", "--points", "-3"},
                      "--points '-3': must be a positive integer");
    check_usage_error({tiny, "--sweep", "--points", "1"},
                      "--points '1': a sweep needs at least 2 budgets");
    check_usage_error(
        {tiny, "--sweep", "--solver", "optimal,,store-all"}, "unknown solver '' (known: " + [] {
          std::string all;
          for (const remat::solver s : remat::all_solvers)
            all += (all.empty() ? "" : ", ") + std::string(remat::name(s));
          return all;
        }() + ")");

    // `--opt=value` is the same as `--opt value`; `--` ends the options.
    CHECK(run({tiny, "--budget=45MB", "--json"}).out ==
          run({tiny, "--budget", "45MB", "--json"}).out);
    CHECK(run({"--budget", "45MB", "--json", "--", tiny}).status == 0);
  }

  TEST_CASE("--sweep: the golden table of a small chain, every solver") {
    const run_result r = run({tiny, "--sweep", "--points", "5"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    const std::string expected = slurp(data / "tools" / "tiny-mlp-sweep-5.txt");
    REQUIRE(!expected.empty());
    CHECK(r.out == expected);
  }

  TEST_CASE("--sweep --csv --plot: a CSV with a row per budget and solver, a well-formed SVG") {
    const scratch_dir dir("sweep");
    const std::string csv = (dir.path() / "sweep.csv").string();
    const std::string svg = (dir.path() / "sweep.svg").string();
    const run_result r =
        run({resnet101, "--sweep", "--slots", "exact", "--points", "12", "--solver",
             "optimal,chen-sqrt,revolve,store-all", "--csv", csv, "--plot", svg});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.starts_with("chain      resnet101-b32-224-fp32 (35 stages"));

    const remat::io::chain_file f = remat::io::read_chain_file(resnet101);
    const auto all = remat::detail::store_all_ops(static_cast<std::int32_t>(f.chain.length()));
    const remat::replay_result base = remat::simulate(f.chain, std::span<const remat::op>(all));
    const long long least =
        remat::solve_optimal(f.chain, 0, {.slots = remat::exact_units}).min_feasible_budget;
    const remat::trade_off_result curve = remat::trade_off(f.chain);
    REQUIRE(curve.points.size() > 12);  // so that the curve adds budgets to the sweep's
    CHECK(r.out.find("curves     optimal " + std::to_string(curve.points.size()) +
                     " points: every budget\n") != std::string::npos);

    // The CSV: the header, then the 12 budgets x 4 solvers and optimal at every point of its
    // curve, budgets outer.
    std::ifstream in(csv);
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line ==
          "budget,budget_fraction,solver,feasible,makespan,makespan_ratio,peak_memory,"
          "min_feasible_budget,retained");
    const std::vector<std::string> solvers = {"optimal", "chen-sqrt", "revolve", "store-all"};
    std::vector<long long> budgets;                     // where every solver has a row
    std::vector<std::pair<long long, double>> optimal;  // optimal's rows
    long long last_budget = -1;
    std::size_t last_solver = 0;
    int rows = 0;
    while (std::getline(in, line)) {
      CAPTURE(line);
      std::vector<std::string> cells;
      std::size_t start = 0;
      while (true) {
        const std::size_t comma = line.find(',', start);
        cells.push_back(line.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      REQUIRE(cells.size() == 9);
      const long long budget = std::stoll(cells[0]);
      const auto solver = static_cast<std::size_t>(
          std::find(solvers.begin(), solvers.end(), cells[2]) - solvers.begin());
      REQUIRE(solver < solvers.size());
      // Budgets outer, increasing; the solvers in the requested order within a budget.
      CHECK(budget >= last_budget);
      if (budget == last_budget) CHECK(solver > last_solver);
      if (solver == 1) budgets.push_back(budget);
      last_budget = budget;
      last_solver = solver;
      CHECK(std::stod(cells[1]) ==
            doctest::Approx(static_cast<double>(budget) / static_cast<double>(base.peak_memory)));
      CHECK((cells[3] == "true" || cells[3] == "false"));
      if (cells[3] == "true") {
        const double makespan = std::stod(cells[4]);
        CHECK(std::stod(cells[5]) == doctest::Approx(makespan / base.makespan));
        CHECK(std::stoll(cells[6]) <= budget);
        CHECK(std::stoll(cells[7]) <= budget);
        CHECK(std::stoll(cells[8]) <= std::stoll(cells[6]));  // retained <= peak
        if (solver == 0) optimal.emplace_back(budget, makespan);
      } else {
        CHECK(solver != 0);  // optimal fits every budget of its sweep
        CHECK(cells[4].empty());
        CHECK(cells[5].empty());
        CHECK(cells[6].empty());
        CHECK(std::stoll(cells[7]) > budget);
      }
      ++rows;
    }
    REQUIRE(budgets.size() == 12);
    CHECK(budgets.front() == least);
    CHECK(budgets.back() == base.peak_memory);
    // Optimal: at the 12 budgets and at every point of its curve, with the curve's makespans,
    // never slower with more memory.
    std::size_t on_curve = 0;
    for (std::size_t k = 0; k < optimal.size(); ++k) {
      CAPTURE(optimal[k].first);
      if (k > 0) CHECK(optimal[k].second <= optimal[k - 1].second);
      const bool sampled =
          std::find(budgets.begin(), budgets.end(), optimal[k].first) != budgets.end();
      const auto point = std::find_if(
          curve.points.begin(), curve.points.end(),
          [&](const remat::trade_off_point& p) { return p.budget == optimal[k].first; });
      CHECK((sampled || point != curve.points.end()));
      if (point != curve.points.end()) {
        ++on_curve;
        CHECK(optimal[k].second == doctest::Approx(point->makespan).epsilon(1e-12));
      }
    }
    CHECK(on_curve == curve.points.size());
    CHECK(rows == static_cast<int>(3 * budgets.size() + optimal.size()));

    // The SVG: well-formed XML, one polyline per solver, the chain's name in the title.
    const std::string doc = slurp(svg);
    CHECK(doc.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
    CHECK(well_formed_xml(doc) == "");
    std::size_t polylines = 0;
    for (std::size_t at = doc.find("<polyline"); at != std::string::npos;
         at = doc.find("<polyline", at + 1))
      ++polylines;
    CHECK(polylines == solvers.size());
    // Optimal's line is its curve as a step function: each point, and a corner before each but
    // the first (the last point is the store-all peak, where the sweep ends).
    const std::size_t optimal_line = doc.rfind("<polyline points=\"", doc.find("<title>optimal"));
    REQUIRE(optimal_line != std::string::npos);
    const std::size_t first = optimal_line + std::strlen("<polyline points=\"");
    const std::string vertices = doc.substr(first, doc.find('"', first) - first);
    CHECK(static_cast<std::size_t>(std::count(vertices.begin(), vertices.end(), ' ')) + 1 ==
          2 * curve.points.size() - 1);
    CHECK(doc.find("<title>resnet101-b32-224-fp32: makespan against memory budget</title>") !=
          std::string::npos);
    for (const std::string& s : solvers) CHECK(doc.find(">" + s + "</text>") != std::string::npos);
    CHECK(doc.find("memory budget / store-all peak memory") != std::string::npos);
    CHECK(doc.find("makespan / store-all makespan") != std::string::npos);
    // And a real XML parser agrees, where python3 is installed.
    const int parsed = std::system(
        ("python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
         "sys.exit(0 if r.tag.endswith(\"svg\") else 1)' " +
         shell_quote(svg) + " >/dev/null 2>&1")
            .c_str());
    if (WIFEXITED(parsed) && WEXITSTATUS(parsed) != 127) CHECK(WEXITSTATUS(parsed) == 0);
  }

  TEST_CASE("--sweep: exhaustive is left out of the default list on long chains, and says so") {
    const run_result r = run({resnet, "--sweep", "--points", "3", "--slots", "exact"});
    CHECK(r.status == 0);
    CHECK(r.err ==
          "remat-solve: --sweep leaves out exhaustive: the chain has 13 stages, more than its "
          "limit of 7\n");
    CHECK(r.out.find("exhaustive") == std::string::npos);
    for (const remat::solver s : remat::all_solvers) {
      if (s == remat::solver::exhaustive) continue;
      // (Appended, not " " + std::string(...): g++ 12 warns -Wrestrict on that, a false alarm.)
      std::string word = " ";
      word += remat::name(s);
      word += ' ';
      // Without a link, offload would repeat optimal's rows and the baselines cannot run.
      if (s == remat::solver::offload || remat::needs_link(s))
        CHECK(r.out.find(word) == std::string::npos);
      else
        CHECK(r.out.find(word) != std::string::npos);
    }
    // Asked for by name, it refuses the chain as --budget does.
    const run_result e = run({resnet, "--sweep", "--solver", "optimal,exhaustive"});
    CHECK(e.status == 2);
    CHECK(e.out.empty());
    CHECK(e.err.starts_with("remat-solve: exhaustive: the chain has 13 stages"));
    // A file that cannot be written: exit 2, nothing on stdout.
    const run_result w = run({tiny, "--sweep", "--csv", (data / "no-such-dir" / "x.csv").string()});
    CHECK(w.status == 2);
    CHECK(w.out.empty());
    CHECK(w.err == "remat-solve: cannot write '" + (data / "no-such-dir" / "x.csv").string() +
                       "': No such file or directory\n");
  }

  TEST_CASE("--info: the figures of the simulator and of the optimal solver, text and JSON") {
    for (const std::string& path : {tiny, resnet}) {
      CAPTURE(path);
      const remat::io::chain_file f = remat::io::read_chain_file(path);
      const remat::chain& c = f.chain;
      const auto L = static_cast<std::int32_t>(c.length());
      const auto all = remat::detail::store_all_ops(L);
      const remat::replay_result base = remat::simulate(c, std::span<const remat::op>(all));
      const long long least = remat::solve_optimal(c, 0).min_feasible_budget;
      const long long least_exact =
          remat::solve_optimal(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
      // The largest single-stage need, from docs/model.md's op table: F_all(k) holds its input and
      // its tape with its overhead; B(k) its input, the tape, g_{k+1}, g_k and its overhead; the
      // loss a_L (or t_L), g_L and its overhead.
      long long largest = 0;
      std::size_t largest_stage = 0;
      for (std::size_t k = 0; k <= c.length(); ++k) {
        long long need = 0;
        if (k == c.length()) {
          need = 2 * c.stages.back().output_size + c.loss_overhead;
        } else {
          const remat::stage& s = c.stages[k];
          const long long x = k == 0 ? c.input_size : c.stages[k - 1].output_size;
          need = std::max(x + s.tape_size + s.forward_overhead,
                          x + s.tape_size + s.output_size + x + s.backward_overhead);
        }
        if (need > largest) {
          largest = need;
          largest_stage = k;
        }
      }
      // No schedule fits below it: the least persistent budget does not.
      CHECK(largest <= least_exact);

      const run_result info = run({path, "--info", "--json"});
      CHECK(info.status == 0);
      CHECK(info.err.empty());
      const nlohmann::ordered_json j = nlohmann::ordered_json::parse(info.out);
      std::vector<std::string> keys;
      for (const auto& item : j.items()) keys.push_back(item.key());
      CHECK(keys == std::vector<std::string>{"name", "stages", "input_size", "store_all_makespan",
                                             "store_all_memory", "slots", "min_feasible_budget",
                                             "min_feasible_budget_exact", "largest_stage_memory",
                                             "largest_stage", "store_all_retained"});
      CHECK(j["name"] == f.name);
      CHECK(j["stages"] == c.length());
      CHECK(j["input_size"] == c.input_size);
      CHECK(j["store_all_makespan"].get<double>() == base.makespan);
      CHECK(j["store_all_memory"].get<long long>() == base.peak_memory);
      CHECK(j["slots"] == "exact");
      CHECK(j["min_feasible_budget"].get<long long>() == least);
      CHECK(j["min_feasible_budget_exact"].get<long long>() == least_exact);
      CHECK(j["largest_stage_memory"].get<long long>() == largest);
      CHECK(j["largest_stage"].get<std::size_t>() == largest_stage);

      const nlohmann::json e = run_json({path, "--info", "--json", "--slots", "exact"}, 0);
      CHECK(e["slots"] == "exact");
      CHECK(e["min_feasible_budget"].get<long long>() == least_exact);

      const run_result t = run({path, "--info"});
      CHECK(t.status == 0);
      CHECK(t.err.empty());
      CHECK(t.out.find("\nstore-all      makespan " + six_digits(base.makespan)) !=
            std::string::npos);
      CHECK(t.out.find("peak " + std::to_string(base.peak_memory)) != std::string::npos);
      CHECK(t.out.find("\nmin budget     " + std::to_string(least)) != std::string::npos);
      CHECK(t.out.find("\nlargest stage  " + std::to_string(largest)) != std::string::npos);
    }
    const run_result g = run({tiny, "--info"});
    CHECK(g.out == slurp(data / "tools" / "tiny-mlp-info.txt"));
  }

  TEST_CASE("options per stage: --info counts them; schedules name F_all's option") {
    const std::string path = (data / "chains" / "resnet18-rockmate-options.json").string();
    const remat::io::chain_file f = remat::io::read_chain_file(path);
    const nlohmann::ordered_json info =
        nlohmann::ordered_json::parse(run({path, "--info", "--json"}).out);
    CHECK(info["options"].get<std::vector<std::size_t>>() ==
          std::vector<std::size_t>{1, 1, 1, 7, 7, 11, 7, 10, 7, 7, 5, 1, 1});
    const std::string text = run({path, "--info"}).out;
    CHECK(text.find("\noptions        8 of 13 stages list options, 66 in all; most: 11, stage 5 "
                    "(block5)\n               per stage: 1 1 1 7 7 11 7 10 7 7 5 1 1") !=
          std::string::npos);
    // A chain without options says nothing of them.
    CHECK(run({resnet, "--info"}).out.find("options") == std::string::npos);
    CHECK(!run_json({resnet, "--info", "--json"}, 0).contains("options"));

    // At 730 the optimum records some stage with an option other than 0 (the DP beats the
    // chain without options there: tests/unit/solvers/options.cpp).
    const nlohmann::json j = run_json({path, "--budget", "730", "--slots", "exact", "--json"}, 0);
    const std::vector<remat::op> ops = ops_of(j, f.chain.length());
    CHECK(std::any_of(ops.begin(), ops.end(), [](const remat::op& o) { return o.option != 0; }));
    const remat::replay_result r = remat::simulate(f.chain, std::span<const remat::op>(ops));
    REQUIRE(r.valid());
    CHECK(r.peak_memory <= 730);
    CHECK(j["makespan"].get<double>() == doctest::Approx(r.makespan).epsilon(1e-12));
    CHECK(j["makespan"].get<double>() <
          run_json({resnet, "--budget", "730", "--slots", "exact", "--json"}, 0)["makespan"]
              .get<double>());
    const std::string report = run({path, "--budget", "730", "--slots", "exact"}).out;
    for (const remat::op& o : ops)
      if (o.option != 0) CHECK(report.find(remat::to_string(o)) != std::string::npos);
  }

  TEST_CASE("--bandwidth: the link to host memory, per second or in the chain's units") {
    const remat::io::chain_file f = remat::io::read_chain_file(tiny);
    const remat::chain& c = f.chain;
    // tiny-mlp is in ms and bytes: 25GB/s is 25000000 bytes per ms, each way.
    const nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(run({tiny, "--info", "--json", "--bandwidth", "25GB/s"}).out);
    std::vector<std::string> keys;
    for (const auto& item : j.items()) keys.push_back(item.key());
    CHECK(keys == std::vector<std::string>{"name", "stages", "input_size", "store_all_makespan",
                                           "store_all_memory", "slots", "min_feasible_budget",
                                           "min_feasible_budget_exact", "largest_stage_memory",
                                           "largest_stage", "store_all_retained", "transfer",
                                           "transfer_stages"});
    CHECK(j["transfer"]["offload_bandwidth"] == 25e6);
    CHECK(j["transfer"]["prefetch_bandwidth"] == 25e6);
    // The least budget with offloading: offload's own, never above optimal's.
    remat::chain with_link = c;
    with_link.transfer = {25e6, 25e6};
    CHECK(j["transfer"]["min_feasible_budget_offload"] ==
          remat::solve(with_link, 0, {.solver = remat::solver::offload, .slots = remat::exact_units})
              .min_feasible_budget);
    CHECK(j["transfer"]["min_feasible_budget_offload"].get<long long>() <=
          j["min_feasible_budget"].get<long long>());
    // Each stage: a_k offloaded beside F(k), prefetched beside B(k+1); t_{k+1} offloaded beside
    // F(k+1), prefetched beside B(k+1); the loss in place of stage L.
    REQUIRE(j["transfer_stages"].size() == c.length());
    double input_hidden = 0, input_total = 0;
    for (std::size_t k = 0; k < c.length(); ++k) {
      CAPTURE(k);
      const auto& s = j["transfer_stages"][k];
      const bool last = k + 1 == c.length();
      const double x = static_cast<double>(k == 0 ? c.input_size : c.stages[k - 1].output_size);
      const double xb = static_cast<double>(c.stages[k].tape_size);
      const double fw = c.stages[k].forward_time;
      const double next_fw = last ? c.loss_time : c.stages[k + 1].forward_time;
      const double next_bw = last ? c.loss_time : c.stages[k + 1].backward_time;
      CHECK(s["stage"] == k);
      CHECK(s["input_size"] == x);
      CHECK(s["tape_size"] == xb);
      CHECK(s["input_offload_time"].get<double>() == x / 25e6);
      CHECK(s["input_offload_hidden"].get<double>() == std::min(1.0, fw / (x / 25e6)));
      CHECK(s["input_prefetch_hidden"].get<double>() == std::min(1.0, next_bw / (x / 25e6)));
      CHECK(s["tape_offload_time"].get<double>() == xb / 25e6);
      CHECK(s["tape_offload_hidden"].get<double>() == std::min(1.0, next_fw / (xb / 25e6)));
      CHECK(s["tape_prefetch_hidden"].get<double>() == std::min(1.0, next_bw / (xb / 25e6)));
      input_hidden += std::min(fw, x / 25e6);
      input_total += x / 25e6;
    }
    CHECK(j["transfer"]["input_offload_hidden"].get<double>() ==
          doctest::Approx(input_hidden / input_total));
    const run_result text = run({tiny, "--info", "--bandwidth", "25GB/s"});
    CHECK(text.status == 0);
    CHECK(text.out.starts_with(run({tiny, "--info"}).out));
    CHECK(text.out.find("\ntransfer       25000000 bytes/ms (25 GB/s) each way\n") !=
          std::string::npos);
    CHECK(text.out.find(", with offloading (offload, exact sizes)\n") != std::string::npos);
    CHECK(text.out.find("\n0 fc1         4000000    100.0%    100.0%       16000000     39.1%"
                        "     78.1%\n") != std::string::npos);

    // Both directions apart, binary units, a bare number in the chain's units.
    const auto rates = [&](const std::string& path, const std::string& bw) {
      const nlohmann::json r = run_json({path, "--info", "--json", "--bandwidth", bw}, 0);
      return std::pair(r["transfer"]["offload_bandwidth"].get<double>(),
                       r["transfer"]["prefetch_bandwidth"].get<double>());
    };
    CHECK(rates(tiny, "47GB/s,55GB/s") == std::pair(47e6, 55e6));
    CHECK(rates(tiny, "25GiB/s") == std::pair(25 * 0x1p30 / 1e3, 25 * 0x1p30 / 1e3));
    CHECK(rates(tiny, "400MB/s,1TB/s") == std::pair(400e3, 1e9));
    CHECK(rates(tiny, "1.5e7") == std::pair(1.5e7, 1.5e7));
    CHECK(rates(resnet, "4,0") == std::pair(4.0, 0.0));  // in slots per ms

    // A chain file's own transfer, in seconds; --bandwidth replaces it, 0 removes it.
    const scratch_dir dir("bandwidth");
    const auto chain_in = [&](const std::string& file, const std::string& units,
                              const std::string& transfer) {
      const std::string path = (dir.path() / file).string();
      std::ofstream(path) << R"({"input_size": 4000000, )" << units
                          << R"("stages": [{"forward_time": 0.001, "backward_time": 0.002,
                                 "output_size": 8000000, "tape_size": 16000000}])"
                          << transfer << "}";
      return path;
    };
    const std::string in_s = chain_in("s.json", R"("units": {"time": "s", "memory": "bytes"}, )",
                                      R"(, "transfer": {"offload_bandwidth": 2.5e10})");
    const nlohmann::json own = run_json({in_s, "--info", "--json"}, 0);
    CHECK(own["transfer"]["offload_bandwidth"] == 2.5e10);
    CHECK(own["transfer"]["prefetch_bandwidth"] == 0.0);
    CHECK(own["transfer_stages"][0]["input_offload_time"] == 4000000 / 2.5e10);
    CHECK(own["transfer_stages"][0]["input_prefetch_time"].is_null());
    CHECK(own["transfer_stages"][0]["input_prefetch_hidden"].is_null());
    CHECK(own["transfer"]["input_prefetch_hidden"].is_null());
    CHECK(rates(in_s, "47GB/s,55GB/s") == std::pair(47e9, 55e9));
    const nlohmann::json removed = run_json({in_s, "--info", "--json", "--bandwidth", "0"}, 0);
    CHECK(!removed.contains("transfer"));
    CHECK(!removed.contains("transfer_stages"));
    const std::string in_us =
        chain_in("us.json", R"("units": {"time": "us"}, )", "");  // no memory unit: bytes
    CHECK(rates(in_us, "25GB/s") == std::pair(25e3, 25e3));
    const std::string no_time = chain_in("none.json", "", "");
    CHECK(rates(no_time, "7") == std::pair(7.0, 7.0));

    // A solve on a chain with a link: a schedule that replays on it within the budget, whatever
    // ops it uses.
    const nlohmann::json solved =
        run_json({tiny, "--budget", "45MB", "--json", "--bandwidth", "47GB/s,55GB/s"}, 0);
    remat::chain linked = c;
    linked.transfer = {47e6, 55e6};
    const std::vector<remat::op> ops = ops_of(solved, c.length());
    const remat::replay_result replayed = remat::simulate(linked, std::span<const remat::op>(ops));
    REQUIRE(replayed.valid());
    CHECK(replayed.fits(45000000));
    CHECK(solved["makespan"].get<double>() == replayed.makespan);
    CHECK(solved["peak_memory"].get<long long>() == replayed.peak_memory);
    const run_result report = run({tiny, "--budget", "45MB", "--bandwidth", "47GB/s,55GB/s"});
    CHECK(report.status == 0);
    CHECK(report.out.find("\ntransfer   offload 47000000 bytes/ms (47 GB/s), prefetch 55000000 "
                          "bytes/ms (55 GB/s)\n") != std::string::npos);
    CHECK(run({tiny, "--sweep", "--points", "2", "--solver", "optimal,store-all", "--bandwidth",
               "25GB/s"})
              .status == 0);

    // Bad values and misplaced uses: exit 2, naming the option.
    check_usage_error({tiny, "--info", "--bandwidth", "fast"},
                      "--bandwidth 'fast': must be a non-negative number with an optional unit "
                      "per second, or two as OUT,IN (e.g. 25GB/s, 47GB/s,55GB/s, 1.5e7, 0 for "
                      "none)");
    check_usage_error({tiny, "--info", "--bandwidth", "-25GB/s"},
                      "--bandwidth '-25GB/s': must be a non-negative number with an optional unit "
                      "per second, or two as OUT,IN (e.g. 25GB/s, 47GB/s,55GB/s, 1.5e7, 0 for "
                      "none)");
    check_usage_error({tiny, "--info", "--bandwidth", "25Gb/s"},
                      "--bandwidth '25Gb/s': unknown unit 'Gb/s' (use B/s, KB/s, MB/s, GB/s, "
                      "TB/s, KiB/s, MiB/s, GiB/s or TiB/s; a number without a unit is in the "
                      "chain's units)");
    check_usage_error({tiny, "--info", "--bandwidth", "1,2,3"},
                      "--bandwidth '1,2,3': give one rate, or two as OUT,IN");
    check_usage_error({tiny, "--info", "--bandwidth", "1e999GB/s"},
                      "--bandwidth '1e999GB/s': too large");
    check_usage_error({tiny, "--info", "--bandwidth"}, "--bandwidth needs a value");
    check_usage_error({tiny, "--frontier", "--bandwidth", "25GB/s"},
                      "--bandwidth does not apply to --frontier");
    const std::string not_bytes =
        "are not seconds and bytes: a unit per second needs units.time s, ms or us and "
        "units.memory bytes, B or none; give a number without a unit, in the chain's memory "
        "units per time unit";
    check_usage_error(
        {resnet, "--budget", "800", "--bandwidth", "25GB/s"},
        "--bandwidth '25GB/s': the chain's units (time 'ms', memory 'slots') " + not_bytes);
    check_usage_error(
        {no_time, "--info", "--bandwidth", "1,25GB/s"},
        "--bandwidth '1,25GB/s': the chain's units (time absent, memory absent) " + not_bytes);
    check_usage_error(
        {tiny, "--info", "--bandwidth", "1e-320"},
        "--bandwidth '1e-320': transfer.offload_bandwidth: is too small: moving the chain's "
        "memory at this rate overflows the time (0.000000)");
  }

  TEST_CASE("a solver that refuses the request: exit 2 with its reason") {
    const run_result r = run({resnet, "--budget", "800", "--solver", "exhaustive"});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "remat-solve: exhaustive: the chain has 13 stages; the search over all op sequences is "
          "limited to 7 (use the optimal solver)\n");
    // A dense DP table beyond any memory limit (petabytes of units) is refused, not attempted.
    const std::string petabyte = (data / "chains" / "petabyte.json").string();
    const run_result u =
        run({petabyte, "--budget", "10000000000000000", "--slots", "10000000000000000"});
    CHECK(u.status == 2);
    CHECK(u.out.empty());
    CHECK(u.err.starts_with("remat-solve: optimal: the DP table for 3 stages"));
    // On the exact sizes (the default) the same request is easy: frontiers, no table.
    CHECK(run({petabyte, "--budget", "10000000000000000"}).status == 0);
    CHECK(run({petabyte, "--budget", "10000000000000000", "--slots", "500"}).status == 0);
  }

  TEST_CASE("--frontier --json: every point of the curve, the first the least budget") {
    const run_result r = run({tiny, "--frontier", "--json"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["solver"] == "optimal");
    CHECK(j["epsilon"] == 0.0);
    REQUIRE(j["points"].size() == 5);
    CHECK(j["points"][0]["budget"] == 40000000);
    CHECK(j["points"][4]["makespan"] == 12.875);
    CHECK(run({tiny, "--frontier", "--solver", "revolve"}).status == 2);
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
      // The offloading solvers get a link (the exhaustive search with transfers would refuse
      // five stages).
      std::vector<std::string> args{tiny, "--budget", "56080000", "--solver", name, "--json"};
      if (s == remat::solver::offload || remat::needs_link(s)) {
        args.emplace_back("--bandwidth");
        args.emplace_back("25GB/s");
      }
      const nlohmann::json j = run_json(args, 0);
      CHECK(j["solver"] == name);
      CHECK(j["feasible"] == true);
      CHECK(j["peak_memory"].get<long long>() <= 56080000);
      CHECK(j["makespan"].get<double>() >= j["store_all_makespan"].get<double>());
      CHECK(j["ops"].size() >= 2 * f.chain.length() + 1);
    }
  }
}

}  // namespace unit_tools_remat_solve_test

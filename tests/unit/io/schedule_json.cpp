// Schedules as JSON: every solver's schedule written and read back op for op (options and
// transfers included), and every malformed document refused with the op and the field named.
#include <remat/io/schedule_json.hpp>

#include "../../support/offload_chains.hpp"
#include "../../support/random_chain.hpp"
#include "../../support/random_schedule.hpp"

#include <remat/simulate.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace unit_schedule_json_test {

namespace {

using remat::op;
namespace io = remat::io;

std::vector<op> read_text(const std::string& text, std::int32_t length = 3) {
  std::istringstream in(text);
  return io::read_schedule(in, "plan.json", length);
}

std::string error_of(const std::string& text) {
  try {
    read_text(text);
  } catch (const io::schedule_file_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("random schedules, with options and transfers, read back op for op") {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 200; ++trial) {
    remat::chain c = remat::testing::random_chain(rng);
    if (trial % 2 == 0) remat::testing::add_random_options(rng, c, 3);
    const bool transfers = trial % 3 == 0;
    if (transfers) c.transfer = {2, 3};
    const auto ops = remat::testing::random_schedule(c, rng, 200, 4, transfers);
    if (!ops) continue;
    CAPTURE(trial);
    const auto L = static_cast<std::int32_t>(c.length());
    const nlohmann::ordered_json j = io::to_json(std::span<const op>(*ops));
    REQUIRE(j.size() == ops->size());
    CHECK(io::ops_from_json(nlohmann::json::parse(j.dump()), L) == *ops);
    // As a document: the array, or an object with "ops".
    CHECK(read_text(j.dump(), L) == *ops);
    CHECK(read_text(R"({"solver": "x", "ops": )" + j.dump() + "}", L) == *ops);
    CHECK(remat::simulate(c, std::span<const op>(read_text(j.dump(), L))).valid());
  }
}

TEST_CASE("the form chain-format.md gives: names, the loss without a stage, options past 0") {
  const std::vector<op> ops{remat::f_ck(0),     remat::f_all(1, 2),
                            remat::loss_op(3),  remat::offload(2, remat::tensor_kind::tape),
                            remat::wait_for(0), remat::prefetch(1)};
  CHECK(io::to_json(std::span<const op>(ops)).dump() ==
        R"([{"op":"F_ck","stage":0},{"op":"F_all","stage":1,"option":2},{"op":"loss"},)"
        R"({"op":"offload","tensor":"t","index":2},{"op":"wait","tensor":"a","index":0},)"
        R"({"op":"prefetch","tensor":"a","index":1}])");
  // The short names of the transfers read too; the loss's index is the length given.
  CHECK(read_text(R"([{"op": "O", "tensor": "a", "index": 1}, {"op": "loss"}])", 5) ==
        std::vector<op>{remat::offload(1), remat::loss_op(5)});
}

TEST_CASE("a malformed schedule names the op and the field") {
  CHECK(error_of("[").starts_with("plan.json: not valid JSON: "));
  CHECK(error_of("3") == "plan.json: ops: must be an array (got number)");
  CHECK(error_of(R"({"op": 1})") == "plan.json: ops: missing");
  CHECK(error_of(R"([{"op": "F_ck", "stage": 0}, 7])") ==
        "plan.json: ops[1]: must be an object (got number)");
  CHECK(error_of(R"([{"stage": 0}])") == "plan.json: ops[0].op: missing");
  CHECK(error_of(R"([{"op": 3}])") == "plan.json: ops[0].op: must be a string (got number)");
  CHECK(error_of(R"([{"op": "F_mid", "stage": 0}])") ==
        "plan.json: ops[0].op: unknown kind 'F_mid' (known: F_none, F_ck, F_all, loss, B, "
        "O|offload, P|prefetch, W|wait)");
  CHECK(error_of(R"([{"op": "F_ck"}])") == "plan.json: ops[0].stage: missing");
  CHECK(error_of(R"([{"op": "F_ck", "stage": "1"}])") ==
        "plan.json: ops[0].stage: must be an integer (got string)");
  CHECK(error_of(R"([{"op": "F_ck", "stage": 1.5}])") ==
        "plan.json: ops[0].stage: must be an integer (got 1.5)");
  CHECK(error_of(R"([{"op": "B", "stage": -1}])") ==
        "plan.json: ops[0].stage: must be from 0 to 2^31 - 1 (got -1)");
  CHECK(error_of(R"([{"op": "B", "stage": 4294967296}])") ==
        "plan.json: ops[0].stage: must be from 0 to 2^31 - 1 (got 4294967296)");
  CHECK(error_of(R"([{"op": "B", "stage": 1, "option": 1}])") ==
        "plan.json: ops[0].option: is not a field of B (its fields: op, stage)");
  CHECK(error_of(R"([{"op": "F_all", "stage": 1, "option": 65536}])") ==
        "plan.json: ops[0].option: must be below 65536 (got 65536)");
  CHECK(error_of(R"([{"op": "loss", "stage": 3}])") ==
        "plan.json: ops[0].stage: is not a field of loss (its fields: op)");
  CHECK(error_of(R"([{"op": "offload", "stage": 1}])") ==
        "plan.json: ops[0].stage: is not a field of O (its fields: op, tensor, index)");
  CHECK(error_of(R"([{"op": "wait", "tensor": "a"}])") == "plan.json: ops[0].index: missing");
  CHECK(error_of(R"([{"op": "prefetch", "tensor": "x", "index": 1}])") ==
        R"(plan.json: ops[0].tensor: must be "a" (activation) or "t" (tape) (got "x"))");
}

TEST_CASE("a schedule file: read from its path, and a missing one named") {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / "remat-schedule-json-test.json";
  const remat::chain c = remat::testing::chain_a();
  {
    std::ofstream out(tmp);
    out << io::to_json(std::span<const op>(remat::testing::chain_a_ops())).dump(2);
  }
  CHECK(io::read_schedule_file(tmp, 2) == remat::testing::chain_a_ops());
  fs::remove(tmp);
  try {
    io::read_schedule_file(tmp, 2);
    FAIL("no error");
  } catch (const io::schedule_file_error& e) {
    CHECK(std::string(e.what()).starts_with(tmp.string() + ": cannot open: "));
    CHECK(e.op_index() == io::schedule_file_error::no_op);
  }
}

}  // namespace unit_schedule_json_test

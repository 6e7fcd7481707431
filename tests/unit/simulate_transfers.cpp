// The simulator's transfer ops (docs/offload.md): the worked examples of chain A, the timing rules
// one at a time, every way a transfer can be invalid, and the agreement of the timed replay with
// docs/model.md's on sequences without transfers.
#include <remat/simulate.hpp>

#include "offload_chains.hpp"
#include "random_chain.hpp"
#include "reference_replay.hpp"
#include "random_schedule.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace unit_simulate_transfers_test {

namespace {

using remat::backward;
using remat::f_all;
using remat::f_ck;
using remat::f_none;
using remat::offload;
using remat::op;
using remat::prefetch;
using remat::replay_error;
using remat::replay_result;
using remat::tensor_kind;
using remat::wait_for;
using remat::testing::chain_a;

replay_result run(const remat::chain& c, const std::vector<op>& ops) {
  return remat::simulate(c, std::span<const op>(ops));
}

TEST_CASE("chain A: a_0 offloaded in the forward and prefetched during B(1): peak 23, time 21") {
  const std::vector<op> ops = {f_all(0),   offload(0), f_all(1),   remat::loss_op(2),
                               backward(1), prefetch(0), backward(0)};
  const replay_result r = run(chain_a(), ops);
  REQUIRE(r.valid());
  CHECK(r.makespan == 21);
  CHECK(r.peak_memory == 23);
  CHECK(r.start == std::vector<double>{0, 0, 4, 8, 9, 9, 17});
  CHECK(r.end == std::vector<double>{4, 4, 8, 9, 17, 13, 21});
  // The table of docs/offload.md: memory right after each op's allocations.
  CHECK(r.op_peak == std::vector<remat::size_type>{6, 6, 2, 23, 4, 9, 12});
  CHECK(remat::to_string(ops[1]) == "O(0,a)");
  CHECK(remat::to_string(prefetch(2, tensor_kind::tape)) == "P(2,t)");
}

TEST_CASE("chain A: the prefetch issued right after the loss overlaps its transient: peak 28") {
  const std::vector<op> ops = {f_all(0),          offload(0),  f_all(1),   remat::loss_op(2),
                               prefetch(0), backward(1), backward(0)};
  const replay_result r = run(chain_a(), ops);
  REQUIRE(r.valid());
  CHECK(r.peak_memory == 28);
  CHECK(r.start[4] == 8);  // with the loss, not after it
  CHECK(r.makespan == 21);
}

TEST_CASE("chain A at bandwidth 5/12: a_0 still in flight at the loss, B(0) waits for P") {
  const std::vector<op> ops = {f_all(0),   offload(0), f_all(1),   remat::loss_op(2),
                               backward(1), prefetch(0), backward(0)};
  const replay_result r = run(chain_a(5.0 / 12), ops);
  REQUIRE(r.valid());
  CHECK(r.end[1] == 12);
  CHECK(r.peak_memory == 28);
  CHECK(r.start[5] == 12);  // after the offload that made its host copy
  CHECK(r.end[5] == 24);
  CHECK(r.makespan == 28);
}

TEST_CASE("chain A without transfers: store-all 28 and 21, as docs/model.md") {
  const std::vector<op> ops = {f_all(0), f_all(1), remat::loss_op(2), backward(1), backward(0)};
  const replay_result r = run(chain_a(), ops);
  REQUIRE(r.valid());
  CHECK(r.peak_memory == 28);
  CHECK(r.makespan == 21);
  CHECK(r.start == std::vector<double>{0, 4, 8, 9, 17});
}

TEST_CASE("a wait holds back the ops issued after it until the offload has ended") {
  // O(0,a) runs 0..12 at 5/12; W(0,a) makes F_all(1) start at 12, after a_0's bytes are free.
  const std::vector<op> ops = {f_all(0),   offload(0), wait_for(0), f_all(1),  remat::loss_op(2),
                               backward(1), prefetch(0), backward(0)};
  const replay_result r = run(chain_a(5.0 / 12), ops);
  REQUIRE(r.valid());
  CHECK(r.start[2] == 12);
  CHECK(r.end[2] == 12);
  CHECK(r.start[3] == 12);
  CHECK(r.op_peak[4] == 23);  // the loss runs without a_0
  CHECK(r.peak_memory == 23);
  // F_all(1) 12..16, loss 16..17, B(1) 17..25, P(0,a) 17..29 (with B(1)), B(0) 29..33.
  CHECK(r.start[6] == 17);
  CHECK(r.makespan == 33);
}

TEST_CASE("an offload frees its bytes only when the compute ops issued before it that read them end") {
  // F_ck(0) reads a_0 over 0..4; O(0,a) at bandwidth 5 (1 time unit) ends at 1 but a_0 stays
  // until 4.
  remat::chain c = chain_a(5);
  const std::vector<op> ops = {f_ck(0), offload(0), f_none(1), f_all(1) /* invalid: a_1 gone */};
  const replay_result bad = run(c, ops);
  CHECK(bad.error == replay_error::input_missing);
  const std::vector<op> good = {f_ck(0),  offload(0),  f_all(1), remat::loss_op(2), backward(1),
                                prefetch(0), f_all(0), backward(0)};
  // F_all(1) needs t_1 or a_1: a_1 from F_ck(0) is held. B(1) needs t_2, g_2 and a_1: fine.
  // B(0) needs t_1: F_all(0) after the prefetch makes it.
  const replay_result r = run(c, good);
  REQUIRE(r.valid());
  CHECK(r.end[1] == 1);
  // At 1 < 4 the ops running are F_ck(0) only; memory 5 + 1 until 4, a_0 freed at 4.
  CHECK(r.op_peak[2] == 1 + 1);  // F_all(1) starts at 4: a_0 freed first, then t_2 allocated
}

TEST_CASE("invalid transfers are reported with the op and the tensor") {
  const remat::chain c = chain_a();
  auto error_of = [&](const std::vector<op>& ops) {
    const replay_result r = run(c, ops);
    return std::pair{r.error, r.first_invalid};
  };
  CHECK(error_of({offload(1)}) == std::pair{replay_error::not_on_device, std::size_t{0}});
  CHECK(error_of({offload(0), offload(0)}) ==
        std::pair{replay_error::not_on_device, std::size_t{1}});
  CHECK(error_of({f_ck(0), offload(0), f_ck(0)}) ==
        std::pair{replay_error::input_missing, std::size_t{2}});
  CHECK(error_of({prefetch(0)}) == std::pair{replay_error::no_host_copy, std::size_t{0}});
  CHECK(error_of({wait_for(0)}) == std::pair{replay_error::no_host_copy, std::size_t{0}});
  CHECK(error_of({offload(0, tensor_kind::tape)}) ==
        std::pair{replay_error::bad_stage, std::size_t{0}});
  CHECK(error_of({offload(3)}) == std::pair{replay_error::bad_stage, std::size_t{0}});
  CHECK(error_of({f_all(0), offload(1, tensor_kind::tape), prefetch(1, tensor_kind::tape),
                  prefetch(1, tensor_kind::tape)}) ==
        std::pair{replay_error::no_host_copy, std::size_t{3}});
  // A recomputed tensor that keeps its host copy cannot be prefetched over, nor offloaded again.
  CHECK(error_of({f_ck(0), offload(1), f_ck(0), prefetch(1)}) ==
        std::pair{replay_error::output_already_held, std::size_t{3}});
  CHECK(error_of({f_ck(0), offload(1), f_ck(0), offload(1)}) ==
        std::pair{replay_error::already_on_host, std::size_t{3}});
  op bad_kind{static_cast<remat::op_kind>(42), 0};
  CHECK(error_of({bad_kind}).first == replay_error::bad_kind);
  op bad_tensor = offload(0);
  bad_tensor.tensor = static_cast<tensor_kind>(7);
  CHECK(error_of({bad_tensor}).first == replay_error::bad_kind);

  remat::chain none = chain_a();
  none.transfer = {};
  const std::vector<op> ops = {offload(0)};
  const replay_result r = run(none, ops);
  CHECK(r.error == replay_error::no_bandwidth);
  CHECK(remat::describe(r, ops) ==
        "op 0 (O(0,a)): the chain's transfer has no offload_bandwidth (0 or absent)");
  none.transfer = {1, 0};
  const std::vector<op> back = {offload(0), prefetch(0)};
  CHECK(run(none, back).error == replay_error::no_bandwidth);
  CHECK(remat::describe(run(c, {prefetch(0)}), std::vector<op>{prefetch(0)}) ==
        "op 0 (P(0,a)): a_0 has no host copy");
}

TEST_CASE("the timed replay agrees with docs/model.md's on random schedules without transfers") {
  std::mt19937_64 rng(29);
  int compared = 0;
  for (int n = 0; n < 2000; ++n) {
    remat::chain c = remat::testing::random_chain(rng);
    const auto ops = remat::testing::random_schedule(c, rng);
    if (!ops) continue;
    const replay_result model = remat::testing::reference_replay(c, *ops);
    const replay_result timed = remat::simulate(c, *ops);
    REQUIRE(model.valid());
    REQUIRE(timed.valid());
    CHECK(timed.makespan == model.makespan);
    CHECK(timed.peak_memory == model.peak_memory);
    CHECK(timed.op_peak == model.op_peak);
    CHECK(timed.memory_after == model.memory_after);
    CHECK(timed.start == model.start);
    CHECK(timed.end == model.end);
    ++compared;
  }
  CHECK(compared > 1500);
}

}  // namespace

}  // namespace unit_simulate_transfers_test

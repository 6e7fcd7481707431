// The simulator against hand-computed replays: makespan, peak, memory after each op, the peak of
// each op, and every way an op can be invalid.
#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace unit_simulate_test {

namespace {

using remat::backward;
using remat::f_all;
using remat::f_ck;
using remat::f_none;
using remat::op;
using remat::replay_error;
using remat::replay_result;
using remat::size_type;
using remat::tensor_ref;

// Three stages whose sizes, overheads and times are all distinct, so that a wrong term shows:
// times are powers of two, so a makespan tells which ops were counted.
//   x  = 1, 2, 3, 4        (a_0 .. a_3, and g_0 .. g_3)
//   xb =    5, 7, 9        (t_1 .. t_3)
//   ft = 10, 20, 30        bt = 40, 50, 60, loss overhead 70
//   fw = 1, 2, 4           bw = 8, 16, 32, loss time 64
constexpr remat::chain distinct() {
  remat::chain c;
  c.input_size = 1;
  c.stages = {{1, 8, 2, 5, 10, 40}, {2, 16, 3, 7, 20, 50}, {4, 32, 4, 9, 30, 60}};
  c.loss_time = 64;
  c.loss_overhead = 70;
  return c;
}

constexpr op loss = remat::loss_op(3);

replay_result run(const std::vector<op>& ops) {
  return remat::simulate(distinct(), ops);
}

void check_valid(const std::vector<op>& ops, double makespan, size_type peak,
                 const std::vector<size_type>& memory_after,
                 const std::vector<size_type>& op_peak) {
  const replay_result r = run(ops);
  CHECK(r.valid());
  CHECK(r.error == replay_error::none);
  CHECK(r.first_invalid == replay_result::npos);
  CHECK(r.makespan == makespan);
  CHECK(r.peak_memory == peak);
  CHECK(r.memory_after == memory_after);
  CHECK(r.op_peak == op_peak);
}

void check_invalid(const std::vector<op>& ops, replay_error error, std::size_t index,
                   tensor_ref tensor) {
  const replay_result r = run(ops);
  CHECK_FALSE(r.valid());
  CHECK(r.error == error);
  CHECK(r.first_invalid == index);
  CHECK(r.tensor == tensor);
  // The figures cover the ops before the invalid one.
  CHECK(r.memory_after.size() == std::min(index, ops.size()));
  CHECK(r.op_peak.size() == std::min(index, ops.size()));
  CHECK_FALSE(r.fits(1000000));
}

const std::vector<op> store_all = {f_all(0),    f_all(1),    f_all(2),   loss,
                                   backward(2), backward(1), backward(0)};

}  // namespace

TEST_CASE("store-all, replayed by hand") {
  // held after: a0 t1 = 6, + t2 = 13, + t3 = 22, + g3 = 26, B(2) +g2 -g3 -t3 = 16,
  // B(1) +g1 -g2 -t2 = 8, B(0) +g0 -g1 -t1 -a0 = 1.
  check_valid(store_all, 1 + 2 + 4 + 64 + 32 + 16 + 8, 96, {6, 13, 22, 26, 16, 8, 1},
              {6 + 10, 13 + 20, 22 + 30, 26 + 70, 29 + 60, 18 + 50, 9 + 40});
}

TEST_CASE("checkpoints, recomputation and the tape of the last stage") {
  // F_ck(0): a0 a1 = 3. F_none(1): + a2 - a1 = 4 (peak while both are held: 6 + 20).
  // F_all(2): + t3 = 13. loss: + g3 = 17 (a3 is not held, t3 stays). B(2): + g2 = 20 at the peak,
  // then - g3 - t3 - a2 = 4. Recompute stages 0 and 1 with tapes: 9, 16. B(1): 18, then 8.
  // B(0): 9, then 1.
  check_valid({f_ck(0), f_none(1), f_all(2), loss, backward(2), f_all(0), f_all(1), backward(1),
               backward(0)},
              1 + 2 + 4 + 64 + 32 + 1 + 2 + 16 + 8, 87, {3, 4, 13, 17, 4, 9, 16, 8, 1},
              {13, 26, 43, 87, 80, 19, 36, 68, 49});
}

TEST_CASE("F_all peaks with the recording overhead, F_none and F_ck with the forward overhead") {
  // The schedule of the test above, with recording overheads 1, 2, 3 (forward: 10, 20, 30):
  // F_all(2) peaks at 13 + 3, F_all(0) at 9 + 1, F_all(1) at 16 + 2; the rest is unchanged.
  remat::chain c = distinct();
  for (std::size_t k = 0; k < 3; ++k)
    c.stages[k].recording_overhead = static_cast<size_type>(k + 1);
  const std::vector<op> ops = {f_ck(0),  f_none(1), f_all(2),    loss,       backward(2),
                               f_all(0), f_all(1),  backward(1), backward(0)};
  const replay_result r = remat::simulate(c, ops);
  REQUIRE(r.valid());
  CHECK(r.op_peak == std::vector<size_type>{13, 26, 16, 87, 80, 10, 18, 68, 49});
  // A recording overhead above the forward one raises only the F_all peaks.
  c.stages[1].recording_overhead = 100;
  CHECK(remat::simulate(c, ops).op_peak[6] == 116);
  CHECK(remat::simulate(c, store_all).op_peak[1] == 113);
}

TEST_CASE("holding a_k and t_k at once counts both") {
  // F_ck(0) then F_all(0): a0 + a1 + t1 = 1 + 2 + 5 = 8. F_none(1) reads a1 (or t1) and drops
  // a1, never the tape: 8 + 3 - 2 = 9.
  check_valid({f_ck(0), f_all(0), f_none(1), f_all(2), loss, backward(2), f_all(1), backward(1),
               backward(0)},
              1 + 1 + 2 + 4 + 64 + 32 + 2 + 16 + 8, 92, {3, 8, 9, 18, 22, 9, 16, 8, 1},
              {13, 18, 31, 48, 92, 85, 36, 68, 49});

  // B(1) with both a1 and t1 held drops a1 and keeps t1, which B(0) then needs.
  check_valid({f_ck(0), f_all(0), f_all(1), f_all(2), loss, backward(2), backward(1), backward(0)},
              1 + 1 + 2 + 4 + 64 + 32 + 16 + 8, 98, {3, 8, 15, 24, 28, 18, 8, 1},
              {13, 18, 35, 54, 98, 91, 70, 49});
}

TEST_CASE("F_none whose input is a tape keeps the tape") {
  // F_all(0): 6. F_none(1) reads t1: + a2 = 9, nothing dropped. F_all(2): 18. loss: 22.
  // B(2): 25, then - g3 - t3 - a2 = 9. F_all(1) from t1: 16. B(1): 18, then 8. B(0): 9, then 1.
  check_valid(
      {f_all(0), f_none(1), f_all(2), loss, backward(2), f_all(1), backward(1), backward(0)},
      1 + 2 + 4 + 64 + 32 + 2 + 16 + 8, 92, {6, 9, 18, 22, 9, 16, 8, 1},
      {16, 29, 48, 92, 85, 36, 68, 49});
}

TEST_CASE("the loss drops a_L and keeps t_L") {
  // F_ck everything (1+2+3+4 = 10), then F_all(2) from a2 (+9 = 19). loss: + g3 = 23, - a3 = 19.
  // B(2) reads t3: + g2 = 22, - g3 - t3 - a2 = 6 (a0 a1 g2). F_all(1) from a1: + t2 = 13.
  // B(1): + g1 = 15, - g2 - t2 - a1 = 3. F_all(0): + t1 = 8. B(0): + g0 = 9, then 1.
  check_valid({f_ck(0), f_ck(1), f_ck(2), f_all(2), loss, backward(2), f_all(1), backward(1),
               f_all(0), backward(0)},
              1 + 2 + 4 + 4 + 64 + 32 + 2 + 16 + 1 + 8, 93, {3, 6, 10, 19, 19, 6, 13, 3, 8, 1},
              {13, 26, 40, 49, 93, 82, 33, 65, 18, 49});
}

TEST_CASE("bad_stage: a stage outside 0..L-1") {
  check_invalid({f_ck(3)}, replay_error::bad_stage, 0, {'a', 3});
  check_invalid({f_all(0), f_none(-1)}, replay_error::bad_stage, 1, {'a', -1});
  check_invalid({f_all(7)}, replay_error::bad_stage, 0, {'a', 7});
  check_invalid({f_all(0), f_all(1), f_all(2), loss, backward(3)}, replay_error::bad_stage, 4,
                {'a', 3});
  check_invalid({backward(-2)}, replay_error::bad_stage, 0, {'a', -2});
  // The loss carries the chain length, as every solver writes it.
  check_invalid({f_all(0), f_all(1), f_all(2), remat::loss_op(2)}, replay_error::bad_stage, 3,
                {'a', 2});
}

TEST_CASE("bad_kind: an op kind outside the five of docs/model.md") {
  const op bogus{static_cast<remat::op_kind>(9), 0};
  check_invalid({f_all(0), bogus}, replay_error::bad_kind, 1, {'a', 0});
  const std::vector<op> ops = {bogus};
  CHECK(remat::describe(run(ops), ops) == "op 0: its kind (9) is not an operation");
}

TEST_CASE("input_missing: forward, loss and backward") {
  check_invalid({f_all(1)}, replay_error::input_missing, 0, {'a', 1});
  check_invalid({f_none(0), f_ck(0)}, replay_error::input_missing, 1, {'a', 0});
  check_invalid({loss}, replay_error::input_missing, 0, {'a', 3});
  check_invalid({f_all(0), f_all(1), loss}, replay_error::input_missing, 2, {'a', 3});
  // F_none(2) drops a2 after B(2)'s tape t3 was recorded: B(2) finds its gradient and tape but no
  // input.
  check_invalid({f_ck(0), f_none(1), f_all(2), f_none(2), loss, backward(2)},
                replay_error::input_missing, 5, {'a', 2});
  // Stage 0's only input is a_0: there is no t_0.
  check_invalid(
      {f_all(0), f_none(0), f_all(1), f_all(2), loss, backward(2), backward(1), backward(0)},
      replay_error::input_missing, 7, {'a', 0});
}

TEST_CASE("output_already_held, for every op kind") {
  check_invalid({f_ck(0), f_none(0)}, replay_error::output_already_held, 1, {'a', 1});
  check_invalid({f_ck(0), f_ck(0)}, replay_error::output_already_held, 1, {'a', 1});
  check_invalid({f_all(0), f_all(0)}, replay_error::output_already_held, 1, {'t', 1});
  check_invalid({f_all(0), f_all(1), f_all(2), loss, loss}, replay_error::output_already_held, 4,
                {'g', 3});
  // After B(2), re-record t3 and rerun the loss: B(2) again would produce g2 a second time.
  check_invalid({f_all(0), f_all(1), f_all(2), loss, backward(2), f_all(2), loss, backward(2)},
                replay_error::output_already_held, 7, {'g', 2});
}

TEST_CASE("gradient_missing and tape_missing") {
  check_invalid({f_all(0), backward(0)}, replay_error::gradient_missing, 1, {'g', 1});
  // The gradient is checked before the tape.
  check_invalid({f_ck(0), backward(0)}, replay_error::gradient_missing, 1, {'g', 1});
  check_invalid({f_ck(0), f_ck(1), f_ck(2), loss, backward(2)}, replay_error::tape_missing, 4,
                {'t', 3});
}

TEST_CASE("after_end and incomplete") {
  std::vector<op> ops = store_all;
  ops.push_back(f_all(0));
  check_invalid(ops, replay_error::after_end, 7, {'g', 0});
  ops.back() = loss;
  check_invalid(ops, replay_error::after_end, 7, {'g', 0});

  ops = store_all;
  ops.pop_back();
  check_invalid(ops, replay_error::incomplete, 6, {'g', 0});
  check_invalid({}, replay_error::incomplete, 0, {'g', 0});

  // An incomplete replay still reports the figures of the ops it ran.
  const replay_result r = run(ops);
  CHECK(r.makespan == 1 + 2 + 4 + 64 + 32 + 16);
  CHECK(r.peak_memory == 96);
  CHECK(r.memory_after == std::vector<size_type>{6, 13, 22, 26, 16, 8});
}

TEST_CASE("an invalid replay reports the figures before the invalid op") {
  const replay_result r = run({f_all(0), f_all(1), f_all(2), loss, loss, backward(2)});
  CHECK(r.error == replay_error::output_already_held);
  CHECK(r.makespan == 1 + 2 + 4 + 64);
  CHECK(r.peak_memory == 96);
  CHECK(r.memory_after == std::vector<size_type>{6, 13, 22, 26});
}

TEST_CASE("describe") {
  auto text = [](const std::vector<op>& ops) { return remat::describe(run(ops), ops); };
  CHECK(text(store_all) == "valid");
  CHECK(text({f_ck(3)}) == "op 0 (F_ck(3)): stage 3 is outside the chain");
  CHECK(text({f_all(0), f_all(1), f_all(2), remat::loss_op(5)}) ==
        "op 3 (loss): the loss carries stage 5, not the chain length");
  CHECK(text({f_none(0), f_none(0)}) == "op 1 (F_none(0)): needs a_0, which is not held");
  CHECK(text({f_ck(0), f_none(1), f_all(2), f_none(2), loss, backward(2)}) ==
        "op 5 (B(2)): needs a_2 (or its tape), which is not held");
  CHECK(text({loss}) == "op 0 (loss): needs a_3 (or its tape), which is not held");
  CHECK(text({f_all(0), f_all(0)}) == "op 1 (F_all(0)): its output t_1 is already held");
  CHECK(text({f_all(0), backward(0)}) == "op 1 (B(0)): needs g_1, which is not held");
  CHECK(text({f_ck(0), f_ck(1), f_ck(2), loss, backward(2)}) ==
        "op 4 (B(2)): needs t_3, which is not held");
  std::vector<op> ops = store_all;
  ops.push_back(f_all(0));
  CHECK(text(ops) == "op 7 (F_all(0)): g_0 was already produced");
  ops.resize(6);
  CHECK(text(ops) == "the schedule ends after 6 ops without producing g_0");
}

TEST_CASE("fits: valid and within the budget") {
  const replay_result r = run(store_all);
  CHECK(r.fits(96));
  CHECK(r.fits(1000));
  CHECK_FALSE(r.fits(95));
}

TEST_CASE("simulate takes schedules, user chains, and checks the chain") {
  const remat::schedule s{store_all, 0, 0};
  CHECK(remat::simulate(distinct(), s).op_peak == run(store_all).op_peak);

  struct user_stage {
    double forward_time, backward_time;
    int output_size, tape_size;
  };
  struct user_chain {
    std::vector<user_stage> stages;
    int input_size;
  };
  const user_chain u{{{1, 2, 3, 4}, {1, 2, 5, 6}}, 7};
  const std::vector<op> two = {f_all(0), f_all(1), remat::loss_op(2), backward(1), backward(0)};
  const replay_result r = remat::simulate(u, two);
  CHECK(r.valid());
  CHECK(r.makespan == 6);
  // a0 t1 t2 g2 = 7 + 4 + 6 + 5, then B(1) adds g1 (3): 25.
  CHECK(r.peak_memory == 25);

  remat::chain bad = distinct();
  bad.stages[1].tape_size = 1;
  CHECK_THROWS_AS(remat::simulate(bad, store_all), remat::chain_error);
}

TEST_CASE("zero sizes: in-place stages need no memory") {
  remat::chain c;
  c.stages.assign(3, {1, 1, 0, 0, 0, 0});
  const replay_result r = remat::simulate(c, store_all);
  CHECK(r.valid());
  CHECK(r.peak_memory == 0);
  CHECK(r.memory_after == std::vector<size_type>(7, 0));
  CHECK(r.fits(0));
}

TEST_CASE("simulate at compile time") {
  static_assert([] {
    const std::vector<op> ops = {f_all(0),    f_all(1),    f_all(2),   remat::loss_op(3),
                                 backward(2), backward(1), backward(0)};
    const replay_result r = remat::simulate(distinct(), std::span<const op>(ops));
    return r.valid() && r.makespan == 127 && r.peak_memory == 96;
  }());
  CHECK(run(store_all).makespan == 127);
}

}  // namespace unit_simulate_test

// Op names and the text form of ops and schedules (the names of docs/model.md and chain-format.md).
#include <remat/schedule.hpp>

#include <doctest/doctest.h>

#include <string>

namespace unit_schedule_test {

namespace {

using remat::op;
using remat::op_kind;

static_assert(remat::name(op_kind::forward_none) == "F_none");
static_assert(remat::name(op_kind::forward_checkpoint) == "F_ck");
static_assert(remat::name(op_kind::forward_all) == "F_all");
static_assert(remat::name(op_kind::loss) == "loss");
static_assert(remat::name(op_kind::backward) == "B");

static_assert(remat::f_none(2) == op{op_kind::forward_none, 2});
static_assert(remat::f_ck(0) == op{op_kind::forward_checkpoint, 0});
static_assert(remat::f_all(7) == op{op_kind::forward_all, 7});
static_assert(remat::loss_op(4) == op{op_kind::loss, 4});
static_assert(remat::backward(1) == op{op_kind::backward, 1});
static_assert(remat::f_ck(1) != remat::f_none(1));
static_assert(remat::f_all(1) != remat::f_all(2));

}  // namespace

TEST_CASE("op names") {
  CHECK(remat::name(op_kind::forward_none) == "F_none");
  CHECK(remat::name(op_kind::forward_checkpoint) == "F_ck");
  CHECK(remat::name(op_kind::forward_all) == "F_all");
  CHECK(remat::name(op_kind::loss) == "loss");
  CHECK(remat::name(op_kind::backward) == "B");
  CHECK(remat::name(static_cast<op_kind>(200)) == "?");
}

TEST_CASE("to_string of an op") {
  CHECK(remat::to_string(remat::f_none(0)) == "F_none(0)");
  CHECK(remat::to_string(remat::f_ck(3)) == "F_ck(3)");
  CHECK(remat::to_string(remat::f_all(12)) == "F_all(12)");
  CHECK(remat::to_string(remat::backward(2)) == "B(2)");
  // The loss is written without its stage, whatever it holds.
  CHECK(remat::to_string(remat::loss_op(5)) == "loss");
  CHECK(remat::to_string(op{}) == "loss");
  // Out-of-range stages are written as they are (the simulator is what rejects them).
  CHECK(remat::to_string(remat::f_all(-1)) == "F_all(-1)");
}

TEST_CASE("to_string of a schedule") {
  remat::schedule s;
  CHECK(remat::to_string(s) == "");
  s.ops = {remat::f_all(0)};
  CHECK(remat::to_string(s) == "F_all(0)");
  s.ops = {remat::f_ck(0),    remat::f_none(1),   remat::f_all(2),
           remat::loss_op(3), remat::backward(2), remat::f_all(0),
           remat::f_all(1),   remat::backward(1), remat::backward(0)};
  CHECK(remat::to_string(s) == "F_ck(0) F_none(1) F_all(2) loss B(2) F_all(0) F_all(1) B(1) B(0)");
}

TEST_CASE("schedules compare by ops, makespan and peak") {
  const remat::schedule a{{remat::f_all(0), remat::loss_op(1), remat::backward(0)}, 3.5, 12};
  remat::schedule b = a;
  CHECK(a == b);
  b.makespan = 3.0;
  CHECK(a != b);
  b = a;
  b.peak_memory = 11;
  CHECK(a != b);
  b = a;
  b.ops[0] = remat::f_ck(0);
  CHECK(a != b);
}

}  // namespace unit_schedule_test

#include <remat/op_table.hpp>

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <doctest/doctest.h>

#include <cstddef>

namespace unit_op_table_test {

using remat::cost_source;
using remat::op_kind;
using remat::operand;

// docs/model.md's and docs/offload.md's tables, row by row.
TEST_CASE("the table says what docs/model.md and docs/offload.md say each op does") {
  using r = remat::op_rule;
  auto row = [](op_kind k) -> const r& { return remat::rule(k); };
  CHECK(row(op_kind::forward_none).reads[0] == operand::input);
  CHECK(row(op_kind::forward_none).makes == operand::activation_above);
  CHECK(row(op_kind::forward_none).frees[0] == operand::activation_input);
  CHECK(row(op_kind::forward_checkpoint).frees[0] == operand::none);
  CHECK(row(op_kind::forward_all).makes == operand::tape_above);
  CHECK(row(op_kind::forward_all).cost == cost_source::recording);
  CHECK(row(op_kind::loss).makes == operand::gradient_here);
  CHECK(row(op_kind::loss).frees[0] == operand::activation_input);
  const r& b = row(op_kind::backward);
  // Checked in this order: g_{k+1}, then t_{k+1}, then the input (the replay's errors say so).
  CHECK(b.reads[0] == operand::gradient_above);
  CHECK(b.reads[1] == operand::tape_above);
  CHECK(b.reads[2] == operand::input);
  CHECK(b.makes == operand::gradient_here);
  CHECK(b.frees[0] == operand::gradient_above);
  CHECK(b.frees[1] == operand::tape_above);
  CHECK(b.frees[2] == operand::activation_input);
  CHECK(row(op_kind::offload).stream == remat::stream::d2h);
  CHECK(row(op_kind::offload).makes == operand::host_copy);
  CHECK(row(op_kind::offload).frees_after_readers);
  CHECK(row(op_kind::prefetch).stream == remat::stream::h2d);
  CHECK(row(op_kind::prefetch).makes == operand::device_copy);
  CHECK(row(op_kind::wait).stream == remat::stream::compute);
  CHECK(row(op_kind::wait).makes == operand::none);
  for (const remat::op_rule& x : remat::op_table) {
    CAPTURE(remat::name(x.kind));
    CHECK(x.stream == remat::stream_of(x.kind));
    CHECK(x.frees_after_readers == (x.kind == op_kind::offload));
  }
  CHECK(!remat::is_op_kind(static_cast<op_kind>(8)));
}

TEST_CASE("each op's time, transient and moved bytes come from the chain's figures") {
  remat::chain c;
  c.input_size = 5;
  c.stages = {{2, 3, 7, 11, 13, 17}, {4, 6, 19, 23, 29, 31}};
  c.stages[1].recording_overhead = 37;
  c.loss_time = 1.5;
  c.loss_overhead = 41;
  c.transfer = {2, 4};
  CHECK(remat::op_time(c, remat::f_none(0)) == 2);
  CHECK(remat::op_transient(c, remat::f_ck(0)) == 13);
  CHECK(remat::op_transient(c, remat::f_all(0)) == 13);  // no recording overhead: ft
  CHECK(remat::op_transient(c, remat::f_all(1)) == 37);
  CHECK(remat::op_time(c, remat::backward(1)) == 6);
  CHECK(remat::op_transient(c, remat::backward(1)) == 31);
  CHECK(remat::op_time(c, remat::loss_op(2)) == 1.5);
  CHECK(remat::op_transient(c, remat::loss_op(2)) == 41);
  CHECK(remat::moved_bytes(c, remat::offload(0)) == 5);
  CHECK(remat::moved_bytes(c, remat::offload(2, remat::tensor_kind::tape)) == 23);
  CHECK(remat::op_time(c, remat::offload(1)) == 7.0 / 2);
  CHECK(remat::op_time(c, remat::prefetch(1, remat::tensor_kind::tape)) == 11.0 / 4);
  CHECK(remat::op_time(c, remat::wait_for(1)) == 0);
  CHECK(remat::op_transient(c, remat::prefetch(1)) == 0);
  static_assert(remat::rule(op_kind::backward).cost == cost_source::backward);
}

}  // namespace unit_op_table_test

#include <remat/op_table.hpp>

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>

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

// The columns the text and JSON forms, the walk's index check and the executors read.
TEST_CASE("the table names each op, its indices, its option and what it allocates") {
  using remat::index_range;
  using remat::tensor_kind;
  const char* names[] = {"F_none", "F_ck", "F_all", "loss", "B", "O", "P", "W"};
  const char* json[] = {"F_none", "F_ck", "F_all", "loss", "B", "offload", "prefetch", "wait"};
  for (std::size_t i = 0; i < remat::op_table.size(); ++i) {
    const remat::op_rule& x = remat::op_table[i];
    CAPTURE(names[i]);
    CHECK(x.name == names[i]);
    CHECK(x.json_name == json[i]);
    CHECK(remat::name(x.kind) == names[i]);
    CHECK(remat::op_kind_named(names[i]) == x.kind);
    CHECK(remat::op_kind_named(json[i]) == x.kind);
    CHECK(x.transfer == (i >= 5));
    CHECK(remat::is_transfer(x.kind) == (i >= 5));
    CHECK(x.takes_option == (x.kind == op_kind::forward_all));
    // A compute op or a prefetch makes a device tensor; an offload a host copy; a wait nothing.
    CHECK(x.allocates() == (x.kind != op_kind::offload && x.kind != op_kind::wait));
    CHECK(x.indices == (i >= 5                    ? index_range::tensor
                        : x.kind == op_kind::loss ? index_range::length
                                                  : index_range::stage));
  }
  CHECK(!remat::op_kind_named("offloads"));
  CHECK(!remat::op_kind_named(""));
  CHECK(remat::op_kind_names() == "F_none, F_ck, F_all, loss, B, O|offload, P|prefetch, W|wait");
  CHECK(remat::name(static_cast<op_kind>(8)) == "?");
  CHECK(!remat::is_transfer(static_cast<op_kind>(8)));
  using bounds = std::array<std::int32_t, 2>;
  CHECK(remat::index_bounds(op_kind::backward, tensor_kind::activation, 4) == bounds{0, 3});
  CHECK(remat::index_bounds(op_kind::loss, tensor_kind::activation, 4) == bounds{4, 4});
  CHECK(remat::index_bounds(op_kind::offload, tensor_kind::activation, 4) == bounds{0, 4});
  CHECK(remat::index_bounds(op_kind::prefetch, tensor_kind::tape, 4) == bounds{1, 4});
  static_assert(remat::op_kind_named("B") == op_kind::backward);
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

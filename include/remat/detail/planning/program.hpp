// A memory plan turned into what an executor walks: per op, the byte ranges of each role, the
// buffers created before and dropped after it, and the ops on other streams it waits for.
// Shared by the host and CUDA executors.
#pragma once

#include <remat/check_plan.hpp>
#include <remat/memory_plan.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace remat::detail {

// `size` bytes at `offset` inside buffer `buffer`.
struct byte_range {
  buffer_id buffer = 0;
  size_type offset = 0;
  size_type size = 0;
};

struct program_step {
  op_kind kind = op_kind::loss;
  std::int32_t stage = 0;
  byte_range input;            // a_k (a_L for the loss); a transfer's source (W: the host copy)
  byte_range output;           // forward: a_{k+1}; backward: a_{k+1} in the tape; O, P: target
  byte_range saved;            // the tape beyond a_{k+1} (forward when recording, backward)
  byte_range output_gradient;  // backward: g_{k+1}
  byte_range input_gradient;   // backward: g_k; loss: g_L
  byte_range workspace;
  std::uint16_t option = 0;  // the option of F_all, or of the tape B reads (step::option)
};

// An op on another stream that must end before a step starts.
struct dependency {
  std::size_t op = 0;
  bool memory = false;  // it frees bytes the step writes (else the step reads what it made)
};

struct program {
  std::vector<program_step> steps;
  std::vector<dependency> waits;         // what step i waits for: waits[waits_begin[i] .. [i+1])
  std::vector<std::size_t> waits_begin;
  std::vector<buffer_id> created;          // buffers created by step i (the input a_0 excluded)
  std::vector<std::size_t> created_begin;  //   are created[created_begin[i] .. [i+1])
  std::vector<buffer_id> dropped;          // buffers dropped after step i (none after the last)
  std::vector<std::size_t> dropped_begin;
  buffer_id input_gradient = no_buffer;  // g_0
};

// The buffers each step creates and drops, as ranges of two flat lists.
inline void index_lifetimes(const memory_plan& m, program& p) {
  const std::size_t n = m.steps.size();
  std::vector<std::size_t> n_created(n + 1, 0), n_dropped(n + 1, 0);
  for (std::size_t id = 1; id < m.buffers.size(); ++id) ++n_created[m.buffers[id].first_op];
  for (const buffer& b : m.buffers)
    if (b.last_op + 1 < n) ++n_dropped[b.last_op];
  auto prefix = [n](const std::vector<std::size_t>& counts) {
    std::vector<std::size_t> begin(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) begin[i + 1] = begin[i] + counts[i];
    return begin;
  };
  p.created_begin = prefix(n_created);
  p.dropped_begin = prefix(n_dropped);
  p.created.resize(p.created_begin[n]);
  p.dropped.resize(p.dropped_begin[n]);
  std::vector<std::size_t> created_at(p.created_begin.begin(), p.created_begin.end() - 1);
  std::vector<std::size_t> dropped_at(p.dropped_begin.begin(), p.dropped_begin.end() - 1);
  for (std::size_t id = 0; id < m.buffers.size(); ++id) {
    const buffer& b = m.buffers[id];
    if (id > 0) p.created[created_at[b.first_op]++] = static_cast<buffer_id>(id);
    if (b.last_op + 1 < n) p.dropped[dropped_at[b.last_op]++] = static_cast<buffer_id>(id);
  }
}

// Refuses a plan an executor cannot run: unsound, not of a complete schedule, or running the
// loss or a backward twice (parameter gradients would be accumulated twice).
inline void check_runnable(const memory_plan& m) {
  if (const memory_plan_check c = check_memory_plan(m); !c.ok())
    throw std::invalid_argument("executor: the memory plan is unsound: " + c.problem);
  if (m.steps.empty() || m.buffers.empty() || m.buffers[0].kind != buffer_kind::activation ||
      m.buffers[0].index != 0 || m.steps.back().op.kind != op_kind::backward ||
      m.steps.back().op.stage != 0)
    throw std::invalid_argument(
        "executor: the memory plan is not that of a complete schedule (a_0 first, B(0) last)");
  // The loss and each B(k) accumulate into the user's parameter gradients: once each.
  std::vector<char> seen(m.steps.size() + 1, 0);
  for (const step& s : m.steps) {
    if (s.op.kind != op_kind::loss && s.op.kind != op_kind::backward) continue;
    if (s.op.stage < 0 || static_cast<std::size_t>(s.op.stage) >= seen.size())
      throw std::invalid_argument("executor: the plan has an op outside the chain, " +
                                  to_string(s.op));
    char& once = seen[static_cast<std::size_t>(s.op.stage)];
    if (once)
      throw std::invalid_argument("executor: the schedule runs " + to_string(s.op) +
                                  " twice; parameter gradients would be accumulated twice");
    once = 1;
  }
}

inline program make_program(const memory_plan& m) {
  check_runnable(m);
  program p;
  const std::size_t n = m.steps.size();
  p.steps.reserve(n);
  auto whole = [&](buffer_id id) { return byte_range{id, 0, m.buffers[id].size}; };
  // Each role's bytes, from the operands of the op's row (op_table.hpp): an activation made is
  // the whole buffer; a tape made or read holds a_{k+1} in its first bytes and the rest saved.
  auto tape_parts = [&](program_step& ps, buffer_id tape, size_type activation) {
    ps.output = {tape, 0, activation};
    ps.saved = {tape, activation, m.buffers[tape].size - activation};
  };
  for (const step& s : m.steps) {
    program_step ps;
    ps.kind = s.op.kind;
    ps.stage = s.op.stage;
    ps.option = s.option;
    if (is_transfer(s.op.kind)) {  // a copy (O, P) or what W waits for: whole buffers
      ps.input = whole(s.input);
      if (s.output != no_buffer) ps.output = whole(s.output);
      p.steps.push_back(ps);
      continue;
    }
    ps.input = {s.input, 0, s.input_size};
    ps.workspace = whole(s.workspace);
    switch (rule(s.op.kind).makes) {
      case operand::activation_above:
        ps.output = whole(s.output);
        ps.saved = {s.output, s.output_size, 0};  // empty, just past the output
        break;
      case operand::tape_above: tape_parts(ps, s.output, s.output_size); break;
      case operand::gradient_here: ps.input_gradient = whole(s.output); break;
      default: break;
    }
    if (s.tape != no_buffer) tape_parts(ps, s.tape, s.output_size);
    if (s.gradient != no_buffer) ps.output_gradient = whole(s.gradient);
    p.steps.push_back(ps);
  }
  index_lifetimes(m, p);
  p.input_gradient = m.steps.back().output;
  p.waits_begin.assign(n + 1, 0);
  for (const wait& w : m.waits) ++p.waits_begin[w.after + 1];
  for (std::size_t i = 0; i < n; ++i) p.waits_begin[i + 1] += p.waits_begin[i];
  p.waits.reserve(m.waits.size());
  for (const wait& w : m.waits) p.waits.push_back({w.before, w.why == wait_reason::memory});
  return p;
}

}  // namespace remat::detail

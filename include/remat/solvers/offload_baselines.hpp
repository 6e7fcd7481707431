// The offloading baselines of docs/offload.md, replayed on the same simulator as every solver.
// Each needs both directions of the chain's link (`transfer`); sizes are used as given.
//
// * save-on-cpu (PyTorch's `torch.autograd.graph.save_on_cpu`, torchtune's activation
//   offloading): store-all, every tape t_k (k < L) offloaded right after the forward that reads
//   it last (F_all(k)), with no wait (its bytes count until its copy ends), and prefetched right
//   after the backward before the one that needs it, so the copy overlaps that backward.
// * vdnn (vDNN, Rhu et al. 2016): every stage's input (a_0, then the tapes t_k) offloaded while
//   the stage's forward runs, the next stage waiting for the copy to end (vDNN frees each input
//   before it moves on); prefetched one stage ahead in the backward, as save-on-cpu.
// * sequential-offload (checkpoint_sequential with DeepSpeed's `cpu_checkpointing`): PyTorch's
//   checkpoint_sequential whose kept segment inputs are offloaded right after the F_ck that reads
//   them, and prefetched during the op before the segment's recomputation; the segment count
//   that fits fastest.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/solvers/segmented.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/sequential.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace remat {

namespace detail {

inline void require_link(const chain& c, solver which) {
  if (!c.transfer.available())
    throw_solver_error(std::string(name(which)) +
                       ": the chain has no link to host memory (give it a `transfer` with both "
                       "bandwidths above 0)");
}

// Store-all with each offloaded tensor k (tapes t_k, k in 1..L-1, and a_0 where `input`) sent out
// after the forward that reads it last, F_all(k) (with a W after it where `wait`), and prefetched
// right before B(k), so that it starts with the op before (B(k+1), or the loss).
inline std::vector<op> offloaded_store_all(std::int32_t L, bool input, bool wait) {
  std::vector<op> ops;
  for (std::int32_t k = 0; k < L; ++k) {
    ops.push_back(f_all(k));
    // F_all(k) is the last forward reading a_0 (k = 0) or t_k (k >= 1).
    if (k == 0 && !input) continue;
    const tensor_kind kind = k == 0 ? tensor_kind::activation : tensor_kind::tape;
    ops.push_back(offload(k, kind));
    if (wait) ops.push_back(wait_for(k, kind));
  }
  ops.push_back(loss_op(L));
  for (std::int32_t k = L - 1; k >= 0; --k) {
    if (k > 0 || input) ops.push_back(prefetch(k, k == 0 ? tensor_kind::activation : tensor_kind::tape));
    ops.push_back(backward(k));
  }
  return ops;
}

// `ops` (checkpoint_sequential's) with every F_ck's input before the loss offloaded right after
// it, and prefetched right after the op before its next reader.
inline std::vector<op> offload_checkpoints(const std::vector<op>& ops) {
  std::vector<op> out;
  std::vector<std::int32_t> sent;
  bool backward_phase = false;
  for (const op& o : ops) {
    // The prefetch issued right before its reader starts with the op issued before it.
    if (backward_phase && !sent.empty() && o.stage == sent.back() &&
        (o.kind == op_kind::forward_all || o.kind == op_kind::forward_checkpoint ||
         o.kind == op_kind::backward)) {
      out.push_back(prefetch(sent.back()));
      sent.pop_back();
    }
    out.push_back(o);
    if (o.kind == op_kind::loss) backward_phase = true;
    if (!backward_phase && o.kind == op_kind::forward_checkpoint) {
      out.push_back(offload(o.stage));
      sent.push_back(o.stage);
    }
  }
  return out;
}

// The result of `offloaded_store_all(L, input, wait)` on `c` for solver `which`.
inline solve_result solve_offloaded_store_all(const chain& c, size_type budget, solver which,
                                              bool input, bool wait) {
  require_link(c, which);
  knob_search search(c, budget, which, keep_rule::fastest);
  search.offer(offloaded_store_all(static_cast<std::int32_t>(c.length()), input, wait));
  return std::move(search).result();
}

}  // namespace detail

/// save-on-cpu: store-all with every tape offloaded after its forward and prefetched during the
/// backward before its own.
template <chain_like C>
solve_result solve_save_on_cpu(const C& chain_in, size_type budget,
                               const solve_options& options = {}) {
  detail::refuse_in_flight(solver::save_on_cpu, options);
  return detail::solve_offloaded_store_all(to_chain(chain_in), budget, solver::save_on_cpu, false,
                                           false);
}

/// vDNN: every stage input offloaded during the stage's forward (the next stage waits for it),
/// prefetched one stage ahead.
template <chain_like C>
solve_result solve_vdnn(const C& chain_in, size_type budget, const solve_options& options = {}) {
  detail::refuse_in_flight(solver::vdnn, options);
  return detail::solve_offloaded_store_all(to_chain(chain_in), budget, solver::vdnn, true, true);
}

/// checkpoint_sequential with its segment inputs offloaded, the segment count that fits fastest.
template <chain_like C>
solve_result solve_sequential_offload(const C& chain_in, size_type budget,
                                      const solve_options& options = {}) {
  detail::refuse_in_flight(solver::sequential_offload, options);
  const chain c = to_chain(chain_in);
  detail::require_link(c, solver::sequential_offload);
  const auto length = static_cast<std::int32_t>(c.length());
  detail::knob_search search(c, budget, solver::sequential_offload, detail::keep_rule::fastest);
  for (std::int32_t segments = 1; segments <= length; ++segments)
    search.offer(detail::offload_checkpoints(detail::sequential_ops(length, segments)));
  return std::move(search).result();
}

namespace detail {
// `solver::save_on_cpu`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::save_on_cpu> : entry<&solve_save_on_cpu<chain>> {};

// `solver::vdnn`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::vdnn> : entry<&solve_vdnn<chain>> {};

// `solver::sequential_offload`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::sequential_offload> : entry<&solve_sequential_offload<chain>> {};
}  // namespace detail

}  // namespace remat

// Coarsening: a long chain as a shorter one whose stages are blocks of consecutive stages, and
// the way back from a schedule of the blocks to one of the stages.
//
//   remat::coarse_chain cc = remat::coarsen(c, 200);          // 200 blocks, least-loss cuts
//   remat::solve_result r = remat::solve(cc.chain, budget);
//   std::vector<remat::op> fine = remat::expand(cc, r.schedule.ops);  // replays on c within budget
//
// The merged costs are safe (proof in detail/coarsen/block.hpp): any schedule of the coarse
// chain, expanded, replays on the fine chain as a valid schedule whose every op peaks no higher
// than the coarse op it comes from, in the same time. `remat::solve` does all of this itself with
// `solve_options::coarsen` (see solve.hpp).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/coarsen/block.hpp>
#include <remat/detail/coarsen/boundaries.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace remat {

/// A coarsening request that cannot be honoured: a stage count of 0 or above the chain's length,
/// cuts out of order or outside the chain, merged sizes above 2^62, or coarse ops that are not
/// ops of the coarse chain.
class coarsen_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A chain whose stage b is the block of stages [starts[b], starts[b + 1]) of a finer chain.
struct coarse_chain {
  remat::chain chain;                ///< the blocks, with merged costs
  std::vector<std::int32_t> starts;  ///< length() + 1 entries: 0, each block's start, then L

  [[nodiscard]] constexpr std::size_t length() const noexcept { return chain.length(); }
  /// The fine chain's length L.
  [[nodiscard]] constexpr std::size_t fine_length() const noexcept {
    return starts.empty() ? 0 : static_cast<std::size_t>(starts.back());
  }
  /// The number of fine stages in the longest block.
  [[nodiscard]] constexpr std::size_t largest_block() const noexcept {
    std::int32_t most = 0;
    for (std::size_t b = 0; b + 1 < starts.size(); ++b)
      most = std::max(most, starts[b + 1] - starts[b]);
    return static_cast<std::size_t>(most);
  }
};

namespace detail {

[[noreturn]] inline void throw_coarsen_error(const std::string& what) {
  throw coarsen_error("coarsen: " + what);
}

// The coarse chain of validated chain `c` with block starts `starts` (checked by the caller).
constexpr coarse_chain merge_blocks(const chain& c, std::vector<std::int32_t> starts) {
  // A block records the tapes of all its stages at once, so several options per stage would make
  // a block's options their product: not done.
  for (std::size_t k = 0; k < c.stages.size(); ++k)
    if (!c.stages[k].options.empty())
      throw_coarsen_error("stages[" + std::to_string(k) +
                          "].options: a chain whose stages list options cannot be coarsened");
  coarse_chain out;
  out.chain.input_size = c.input_size;
  out.chain.loss_time = c.loss_time;
  out.chain.loss_overhead = c.loss_overhead;
  out.chain.transfer = c.transfer;
  out.chain.stages.reserve(starts.size() - 1);
  for (std::size_t b = 0; b + 1 < starts.size(); ++b) {
    block_builder builder(c, starts[b + 1]);
    while (builder.start() > starts[b]) builder.prepend();
    stage s;
    for (std::int32_t k = starts[b]; k < starts[b + 1]; ++k) {
      s.forward_time += c.stages[static_cast<std::size_t>(k)].forward_time;
      s.backward_time += c.stages[static_cast<std::size_t>(k)].backward_time;
    }
    s.output_size = builder.output_size();
    s.tape_size = builder.tape_size();
    s.forward_overhead = builder.forward_overhead();
    s.backward_overhead = builder.backward_overhead();
    const size_type recording = builder.recording_overhead();
    if (recording != s.forward_overhead) s.recording_overhead = recording;
    if (s.tape_size > max_size || s.forward_overhead > max_size || s.backward_overhead > max_size ||
        recording > max_size)
      throw_coarsen_error("block " + std::to_string(b) + " (stages " + std::to_string(starts[b]) +
                          ".." + std::to_string(starts[b + 1] - 1) +
                          ") would have a merged size above 2^62; use more blocks");
    out.chain.stages.push_back(s);
  }
  out.starts = std::move(starts);
  validate(out.chain);
  return out;
}

}  // namespace detail

/// Merges the stages of `c` into `blocks` blocks of consecutive stages (1 <= blocks <= L), cut
/// by `rule` (see detail/coarsen/boundaries.hpp: `least_loss` balances the blocks' memory and
/// prefers cuts at small activations; `even` cuts every L / blocks stages). `blocks` = L gives
/// the chain itself. Throws `chain_error` for a malformed chain, `coarsen_error` for a bad count.
template <chain_like C>
constexpr coarse_chain coarsen(const C& c, std::size_t blocks,
                               boundary_rule rule = boundary_rule::least_loss) {
  const chain fine = to_chain(c);
  const std::size_t L = fine.length();
  if (blocks == 0 || blocks > L)
    detail::throw_coarsen_error("the stage count must be between 1 and the chain's length " +
                                std::to_string(L) + " (got " + std::to_string(blocks) + ")");
  if (L > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 4))
    detail::throw_coarsen_error("chains of more than 2^30 stages are not supported");
  const auto n = static_cast<std::int32_t>(L);
  const auto k = static_cast<std::int32_t>(blocks);
  return detail::merge_blocks(fine, rule == boundary_rule::even
                                        ? detail::even_starts(n, k)
                                        : detail::least_loss_starts(fine, k));
}

/// Merges the stages of `c` into blocks cut before each stage in `cuts` (strictly increasing,
/// each in 1 .. L-1): `{3, 5}` makes blocks 0..2, 3..4 and 5..L-1; no cuts makes one block.
template <chain_like C>
constexpr coarse_chain coarsen(const C& c, const std::vector<std::int32_t>& cuts) {
  const chain fine = to_chain(c);
  const auto L = static_cast<std::int64_t>(fine.length());
  std::vector<std::int32_t> starts;
  starts.reserve(cuts.size() + 2);
  starts.push_back(0);
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    if (cuts[i] < 1 || cuts[i] >= L)
      detail::throw_coarsen_error("cuts[" + std::to_string(i) + "] = " + std::to_string(cuts[i]) +
                                  " is outside 1.." + std::to_string(L - 1) +
                                  " (a cut is the first stage of a block other than the first)");
    if (cuts[i] <= starts.back())
      detail::throw_coarsen_error("cuts must be strictly increasing (cuts[" + std::to_string(i) +
                                  "] = " + std::to_string(cuts[i]) + " after " +
                                  std::to_string(starts.back()) + ")");
    starts.push_back(cuts[i]);
  }
  starts.push_back(static_cast<std::int32_t>(L));
  return detail::merge_blocks(fine, std::move(starts));
}

/// The fine stages [first, end) a coarse op `o` of `cc.chain` stands for: its block's stages; the
/// loss the fine chain's length alone; a transfer of a_K the a_k that starts block K, of t_K the
/// tapes of block K - 1's stages. `o` must be an op of the coarse chain (`expand` checks).
constexpr std::array<std::int32_t, 2> fine_stages(const coarse_chain& cc, const op& o) {
  const auto at = [&cc](std::int32_t k) { return cc.starts[static_cast<std::size_t>(k)]; };
  switch (rule(o.kind).indices) {
    case index_range::length: {
      const auto L = static_cast<std::int32_t>(cc.fine_length());
      return {L, L + 1};
    }
    case index_range::tensor:
      return {o.tensor == tensor_kind::tape ? at(o.stage - 1) + 1 : at(o.stage), at(o.stage) + 1};
    case index_range::stage: break;
  }
  return {at(o.stage), at(o.stage + 1)};
}

/// The fine op at stage `k` of those a coarse op `o` stands for (`fine_stages(cc, o)` =
/// [first, end)): B of a block runs its stages in reverse, F_ck of a block is F_ck of its first
/// stage then F_none of the others; every other op is itself on each stage.
constexpr op fine_op(const op& o, std::int32_t first, std::int32_t end, std::int32_t k) {
  switch (o.kind) {
    case op_kind::backward: return backward(first + end - 1 - k);
    case op_kind::forward_checkpoint: return k == first ? f_ck(k) : f_none(k);
    default: return {o.kind, k, o.tensor};
  }
}

/// The fine-stage ops of a schedule of `cc.chain` (`fine_stages`, `fine_op`). Throws
/// `coarsen_error` for an op that is not one of the coarse chain's.
constexpr std::vector<op> expand(const coarse_chain& cc, std::span<const op> coarse_ops) {
  const auto K = static_cast<std::int32_t>(cc.length());
  std::vector<op> out;
  out.reserve(coarse_ops.size() * (cc.fine_length() / std::max<std::size_t>(1, cc.length()) + 1));
  for (std::size_t i = 0; i < coarse_ops.size(); ++i) {
    const op o = coarse_ops[i];
    const bool known = is_op_kind(o.kind) && o.tensor <= tensor_kind::tape;
    const auto [lowest, highest] =
        known ? index_bounds(o.kind, o.tensor, K) : std::array<std::int32_t, 2>{0, -1};
    if (o.stage < lowest || o.stage > highest) {
      if (known && rule(o.kind).indices == index_range::length)
        detail::throw_coarsen_error("expand: op " + std::to_string(i) +
                                    " (loss) does not carry the coarse length " +
                                    std::to_string(K));
      detail::throw_coarsen_error("expand: op " + std::to_string(i) + " (" + to_string(o) +
                                  ") is not an op of the " + std::to_string(K) +
                                  "-stage coarse chain");
    }
    const auto [first, end] = fine_stages(cc, o);
    for (std::int32_t k = first; k < end; ++k) out.push_back(fine_op(o, first, end, k));
  }
  return out;
}

}  // namespace remat

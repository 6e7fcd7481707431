// Chains and schedules as ranges (range-v3; target remat::ranges, find_package(remat COMPONENTS
// ranges)): a chain built from a profiler's columns, a coarse chain's blocks, and a coarse
// schedule expanded lazily to fine-stage ops.
//
//   std::vector<double> fw = ..., bw = ...;  std::vector<long> out = ..., tape = ...;
//   remat::chain c = remat::chain_from(input_bytes, fw, bw, out, tape);
//   for (remat::op o : remat::views::expand(coarse, plan.ops)) run(o);
//
// The rest of remat (remat/solve.hpp included) does not need range-v3: these are conveniences
// for callers who hold columns or want views, and a consumer that only solves should not have to
// find one more package.
#pragma once

#include <remat/chain.hpp>
#include <remat/coarsen.hpp>
#include <remat/schedule.hpp>

#include <range/v3/range/access.hpp>
#include <range/v3/range/concepts.hpp>
#include <range/v3/range/primitives.hpp>
#include <range/v3/view/all.hpp>
#include <range/v3/view/enumerate.hpp>
#include <range/v3/view/for_each.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/repeat_n.hpp>
#include <range/v3/view/sliding.hpp>
#include <range/v3/view/transform.hpp>
#include <range/v3/view/zip.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace remat {

namespace detail {

template <class Column>
std::size_t column_length(const Column& column) {
  return static_cast<std::size_t>(ranges::distance(column));
}

// Every column has the first one's length; else a chain_error naming the first that does not.
inline void check_column_lengths(std::initializer_list<std::pair<const char*, std::size_t>> cols) {
  const auto& first = *cols.begin();
  for (const auto& [field, length] : cols)
    if (length != first.second)
      throw chain_error(chain_error::no_stage, field,
                        "the column has " + std::to_string(length) + " values, " + first.first +
                            " has " + std::to_string(first.second));
}

}  // namespace detail

/// A chain from columns, one value per stage in each: forward and backward times, output and
/// tape sizes, and optionally forward and backward overheads (0 when absent); after the input
/// size and the columns, the loss's time and overhead.
/// Columns of different lengths, and values that break the model, throw `chain_error` naming the
/// column (and the stage).
template <ranges::forward_range Fw, ranges::forward_range Bw, ranges::forward_range Out,
          ranges::forward_range Tape, ranges::forward_range Fo, ranges::forward_range Bo>
chain chain_from(size_type input, const Fw& fw_column, const Bw& bw_column, const Out& out_column,
                 const Tape& tape_column, const Fo& fo_column, const Bo& bo_column, double loss = 0,
                 size_type loss_transient = 0) {
  detail::check_column_lengths({{"forward_time", detail::column_length(fw_column)},
                                {"backward_time", detail::column_length(bw_column)},
                                {"output_size", detail::column_length(out_column)},
                                {"tape_size", detail::column_length(tape_column)},
                                {"forward_overhead", detail::column_length(fo_column)},
                                {"backward_overhead", detail::column_length(bo_column)}});
  chain c;
  c.input_size = detail::checked_size(input, chain_error::no_stage, "input_size");
  c.loss_time = detail::checked_time(loss, chain_error::no_stage, "loss.backward_time");
  c.loss_overhead =
      detail::checked_size(loss_transient, chain_error::no_stage, "loss.backward_overhead");
  c.stages.reserve(detail::column_length(fw_column));
  for (const auto& [index, s] : ranges::views::enumerate(ranges::views::zip(
           fw_column, bw_column, out_column, tape_column, fo_column, bo_column))) {
    const auto& [fw, bw, out, tape, fo, bo] = s;
    const auto k = static_cast<std::size_t>(index);
    c.stages.push_back({detail::checked_time(fw, k, "forward_time"),
                        detail::checked_time(bw, k, "backward_time"),
                        detail::checked_size(out, k, "output_size"),
                        detail::checked_size(tape, k, "tape_size"),
                        detail::checked_size(fo, k, "forward_overhead"),
                        detail::checked_size(bo, k, "backward_overhead"),
                        {}});
  }
  validate(c);
  return c;
}

/// `chain_from` with a seventh column after the backward overheads: each stage's recording
/// overhead (that of F_all, docs/recording-overhead.md), kept where it differs from its forward
/// overhead.
template <ranges::forward_range Fw, ranges::forward_range Bw, ranges::forward_range Out,
          ranges::forward_range Tape, ranges::forward_range Fo, ranges::forward_range Bo,
          ranges::forward_range Fa>
chain chain_from(size_type input, const Fw& fw_column, const Bw& bw_column, const Out& out_column,
                 const Tape& tape_column, const Fo& fo_column, const Bo& bo_column,
                 const Fa& fa_column, double loss = 0, size_type loss_transient = 0) {
  detail::check_column_lengths({{"forward_time", detail::column_length(fw_column)},
                                {"recording_overhead", detail::column_length(fa_column)}});
  chain c = chain_from(input, fw_column, bw_column, out_column, tape_column, fo_column, bo_column,
                       loss, loss_transient);
  for (const auto& [index, fa] : ranges::views::enumerate(fa_column)) {
    const auto k = static_cast<std::size_t>(index);
    const size_type v = detail::checked_size(fa, k, "recording_overhead");
    if (v != c.stages[k].forward_overhead) c.stages[k].recording_overhead = v;
  }
  validate(c);
  return c;
}

/// `chain_from` without overheads.
template <ranges::forward_range Fw, ranges::forward_range Bw, ranges::forward_range Out,
          ranges::forward_range Tape>
chain chain_from(size_type input, const Fw& fw_column, const Bw& bw_column, const Out& out_column,
                 const Tape& tape_column, double loss = 0, size_type loss_transient = 0) {
  const auto none = ranges::views::repeat_n(size_type{0}, ranges::distance(fw_column));
  return chain_from(input, fw_column, bw_column, out_column, tape_column, none, none, loss,
                    loss_transient);
}

/// A block of a coarse chain: fine stages [first, end).
struct block {
  std::int32_t first = 0;
  std::int32_t end = 0;
  [[nodiscard]] constexpr std::int32_t size() const noexcept { return end - first; }
  friend constexpr bool operator==(const block&, const block&) = default;
};

namespace views {

/// The blocks of `cc`, in order: each pair of consecutive starts.
inline auto blocks(const coarse_chain& cc) {
  return cc.starts | ranges::views::sliding(2) | ranges::views::transform([](const auto& pair) {
           return block{pair[0], pair[1]};
         });
}

/// The fine-stage ops of a coarse schedule, lazily, as `remat::expand` lists them (by the same
/// `fine_stages` and `fine_op`). `cc` and `coarse_ops` must outlive the view; ops must be ops of
/// `cc.chain` (`expand` checks that, this view does not).
template <ranges::forward_range Ops>
auto expand(const coarse_chain& cc, const Ops& coarse_ops) {
  return ranges::views::all(coarse_ops) | ranges::views::for_each([&cc](const op o) {
           const auto [first, end] = fine_stages(cc, o);
           return ranges::views::iota(first, end) |
                  ranges::views::transform([o, first = first, end = end](std::int32_t k) {
                    return fine_op(o, first, end, k);
                  });
         });
}

}  // namespace views

}  // namespace remat

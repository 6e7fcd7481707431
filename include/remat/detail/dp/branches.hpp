// The branches of docs/model.md's DP, written once: for a cell (i, l, m), the loss cell, the base
// cases, the tape branch and the checkpoint branch, each with the least m its own ops fit in, the
// cells it reads (its parts) and what it holds beside them, and the time it adds; the order in
// which `for_each_branch_within` visits them, to which every engine breaks ties; and a cell's
// least branch from its parts' values (`least_branch_within`). Every engine (engines/*, the
// least-memory DP, the read-back, the in-flight and offload spines) reads them here and keeps its
// own loops and layout.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace remat::detail {

// Which branches a DP may take. Without the tape branch (only F_ck/F_none, and F_all(i), B(i) as
// the base case) it is the heterogeneous form of classical AD checkpointing (docs/model.md).
enum class dp_branches : std::uint8_t {
  tape_and_checkpoint,  // docs/model.md's DP: the persistent schedules
  checkpoint_only,      // without the tape branch
};

// OPT where no schedule fits.
inline constexpr double infinite_time = std::numeric_limits<double>::infinity();

// The choice of a cell (`reference_table::choice`): j > 0 the checkpoint branch at j; the tape
// branch (or base case) with the stage's option at position p (in `model::options`) is 0 for
// p = 0 and -1 - p beyond; -1 is no branch.
constexpr std::int32_t tape_choice(std::size_t p) noexcept {
  return p == 0 ? 0 : -1 - static_cast<std::int32_t>(p);
}
constexpr bool is_tape_choice(std::int32_t c) noexcept {
  return c == 0 || c < -1;
}
constexpr std::size_t option_of_choice(std::int32_t c) noexcept {
  return c == 0 ? 0 : static_cast<std::size_t>(-1 - c);
}

// A cell a branch reads: OPT(i, l, m - held), where m is the branch's own cell's memory and
// `held` what the branch holds beside the part while it runs.
struct branch_part {
  std::int32_t i = 0;
  std::int32_t l = 0;
  size_type held = 0;
  [[nodiscard]] constexpr size_type memory(size_type m) const noexcept { return m - held; }
  friend constexpr bool operator==(const branch_part&, const branch_part&) = default;
};

// The loss cell (L, L): the loss op alone, on a_L with g_L added; it needs m >= x[L] + bt[L] and
// takes `model::loss_time`.
constexpr size_type loss_need(const model& md) noexcept {
  return md.x[static_cast<std::size_t>(md.L)] + md.loss_overhead;
}

// The tape ops of stage i in interval (i, l) with option `o`: F_all(i, o) with g_{l+1} held, and
// B(i) (also the base case, l = i).
constexpr size_type tape_ops_memory(const model& md, std::int32_t i, std::int32_t l,
                                    const tape_option& o) noexcept {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  return std::max(md.x[at(l + 1)] + o.xb + o.fa, md.x[at(i)] + md.x[at(i + 1)] + o.xb + o.bt);
}

// The tape branch of (i, l), i < l, with option o of stage i: F_all(i, o), the schedule of the
// rest (i + 1, l) with the tape t_{i+1} held, B(i). With l = i it is the base case of stage i,
// F_all(i, o), B(i), which reads no cell: its value is `time`.
struct tape_branch {
  std::int32_t i = 0;
  std::int32_t l = 0;
  size_type own = 0;   // the least m its own ops fit in: `tape_ops_memory`, >= held
  size_type held = 0;  // xb_o: the tape t_{i+1}, held through the rest
  double time = 0;     // fw_o + bw_o
  [[nodiscard]] constexpr branch_part rest() const noexcept { return {i + 1, l, held}; }
  // Its value from the rest's, OPT(i + 1, l, m - xb_o): the sum every engine forms.
  [[nodiscard]] constexpr double value(double rest_value) const noexcept {
    return time + rest_value;
  }
  // The least m at which it is finite, from the rest's least m (finite).
  [[nodiscard]] constexpr size_type need(size_type rest_need) const noexcept {
    return std::max(own, held + rest_need);
  }
  friend constexpr bool operator==(const tape_branch&, const tape_branch&) = default;
};

constexpr tape_branch tape_branch_of(const model& md, std::int32_t i, std::int32_t l,
                                     const tape_option& o) noexcept {
  return {i, l, tape_ops_memory(md, i, l, o), o.xb, o.fw + o.bw};
}

// A checkpoint branch's value from its parts', in the order of the sums every engine forms (the
// kernels that hold only the forward time call it directly).
constexpr double checkpoint_value(double forward, double right_value, double left_value) noexcept {
  return forward + right_value + left_value;
}

// The checkpoint branch of (i, l), i < l, at split point j in i + 1 .. l: F_ck(i), F_none(i+1)
// .. F_none(j-1), then the right part (j, l) with a_j held, then the left part (i, j - 1) with
// nothing more held (a_i is its input). Its forwards peak, with g_{l+1} held throughout, at
// x[l+1] plus
//   forwards(i, j) = max(x[i+1] + ft[i], max_{i<k<j} x[k] + x[k+1] + ft[k])
// (`f_ck_peak`, `f_none_peak`). docs/model.md checks these peaks through mmin, whose terms
// for k >= j the right part's own cells imply when fa = ft; with fa < ft they no longer do (its
// F_all may peak lower), so the branch checks exactly its own forwards
// (docs/recording-overhead.md): m >= x[l+1] + forwards(i, j). With fa = ft this is the same DP.
struct checkpoint_branch {
  std::int32_t i = 0;
  std::int32_t l = 0;
  std::int32_t j = 0;
  double forward = 0;      // fw[i] + ... + fw[j-1], summed left to right from 0
  size_type forwards = 0;  // forwards(i, j): non-decreasing in j
  size_type own = 0;       // x[l+1] + forwards(i, j): the least m its own ops fit in, >= held
  size_type held = 0;      // x[j]: a_j, held through the right part
  [[nodiscard]] constexpr branch_part right() const noexcept { return {j, l, held}; }
  [[nodiscard]] constexpr branch_part left() const noexcept { return {i, j - 1, 0}; }
  [[nodiscard]] constexpr double value(double right_value, double left_value) const noexcept {
    return checkpoint_value(forward, right_value, left_value);
  }
  // The least m at which it is finite, from its parts' least m (finite).
  [[nodiscard]] constexpr size_type need(size_type right_need, size_type left_need) const noexcept {
    return std::max({own, held + right_need, left_need});
  }
  friend constexpr bool operator==(const checkpoint_branch&, const checkpoint_branch&) = default;
};

// The peaks of the checkpoint branch's forwards above what else is held: F_ck(k) adds a_{k+1} and
// its overhead (its input is outside the cell's m); F_none(k) holds a_k beside a_{k+1}.
constexpr size_type f_ck_peak(const model& md, std::int32_t k) noexcept {
  const auto at = static_cast<std::size_t>(k);
  return md.x[at + 1] + md.ft[at];
}
constexpr size_type f_none_peak(const model& md, std::int32_t k) noexcept {
  const auto at = static_cast<std::size_t>(k);
  return md.x[at] + md.x[at + 1] + md.ft[at];
}

// The checkpoint branch of (i, l) at j from its forward time and forwards(i, j).
constexpr checkpoint_branch checkpoint_branch_of(const model& md, std::int32_t i, std::int32_t l,
                                                 std::int32_t j, double forward,
                                                 size_type forwards) noexcept {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  return {i, l, j, forward, forwards, md.x[at(l + 1)] + forwards, md.x[at(j)]};
}

// The checkpoint branches of (i, l) in the DP's order, j = i + 1 .. l, each from the one before
// in O(1) (none when i = l).
class checkpoint_walk {
 public:
  // (Always inlined: the walk is the inner loop of the engines that use it, and g++ otherwise
  // calls it out of line from the recursive in-flight spine cell.)
  [[gnu::always_inline]] constexpr checkpoint_walk(const model& md, std::int32_t i,
                                                   std::int32_t l) noexcept
      : md_(&md),
        // the forward time sums from 0, as every engine's running sum does
        b_(checkpoint_branch_of(md, i, l, i + 1, 0.0 + md.fw[at(i)], f_ck_peak(md, i))) {}
  [[nodiscard]] constexpr bool done() const noexcept { return b_.j > b_.l; }
  constexpr const checkpoint_branch& operator*() const noexcept { return b_; }
  constexpr const checkpoint_branch* operator->() const noexcept { return &b_; }
  // To split point j + 1: F_none(j) joins the forwards. (Past l it reads stage l <= L, which
  // exists.)
  [[gnu::always_inline]] constexpr void next() noexcept {
    const std::int32_t k = b_.j;
    b_ = checkpoint_branch_of(*md_, b_.i, b_.l, k + 1, b_.forward + md_->fw[at(k)],
                              std::max(b_.forwards, f_none_peak(*md_, k)));
  }

 private:
  static constexpr std::size_t at(std::int32_t k) noexcept { return static_cast<std::size_t>(k); }
  const model* md_;
  checkpoint_branch b_;
};

// Every branch of cell (i, l, m), i < l, whose own ops fit in m, in the DP's order: the tape
// branch with each option of stage i in turn (where `branches` has it), then the checkpoint
// branches by j ascending. Each calls `on_tape(p, branch)` (p: the option's position in
// `model::options(i)`) or `on_checkpoint(branch)`; a call returning false ends the walk. A
// branch's parts get m - held >= 0 (own >= held). Of branches of equal value, every engine keeps
// the first visited (the DP's tie rule).
template <class OnTape, class OnCheckpoint>
constexpr void for_each_branch_within(const model& md, dp_branches branches, std::int32_t i,
                                      std::int32_t l, size_type m, OnTape&& on_tape,
                                      OnCheckpoint&& on_checkpoint) {
  if (branches == dp_branches::tape_and_checkpoint) {
    const std::span<const tape_option> options = md.options(i);
    for (std::size_t p = 0; p < options.size(); ++p) {
      const tape_branch b = tape_branch_of(md, i, l, options[p]);
      if (m >= b.own && !on_tape(p, b)) return;
    }
  }
  // own is non-decreasing in j: past the first that does not fit, none does.
  for (checkpoint_walk w(md, i, l); !w.done() && m >= w->own; w.next())
    if (!on_checkpoint(*w)) return;
}

// The least value of cell (i, l, m), i <= l < L, over its branches whose own ops fit in m (the
// options of the base case for i = l), and the first branch reaching it, from its parts' values
// `value_of(i, l, m)` (infinite: no schedule). A checkpoint branch reads its left part first and
// its right part only where the left is finite (engines that recurse into a part skip the other
// so). The engines' own rules (need, mmin, store, the clamp to S) are theirs.
struct least_branch {
  double value = infinite_time;
  std::int32_t choice = -1;
};

template <class ValueOf>
constexpr least_branch least_branch_within(const model& md, dp_branches branches, std::int32_t i,
                                           std::int32_t l, size_type m, ValueOf&& value_of) {
  least_branch best;
  auto consider = [&best](double v, std::int32_t choice) {
    if (v < best.value) best = {v, choice};
  };
  auto value = [&](const branch_part& p) { return value_of(p.i, p.l, p.memory(m)); };
  if (i == l) {
    const std::span<const tape_option> options = md.options(i);
    for (std::size_t p = 0; p < options.size(); ++p) {
      const tape_branch base = tape_branch_of(md, i, i, options[p]);
      if (m >= base.own) consider(base.time, tape_choice(p));
    }
    return best;
  }
  for_each_branch_within(
      md, branches, i, l, m,
      [&](std::size_t p, const tape_branch& b) {
        const double rest = value(b.rest());
        if (rest < infinite_time) consider(b.value(rest), tape_choice(p));
        return true;
      },
      [&](const checkpoint_branch& b) {
        const double left = value(b.left());
        if (left < infinite_time) consider(b.value(value(b.right()), left), b.j);
        return true;
      });
  return best;
}

}  // namespace remat::detail

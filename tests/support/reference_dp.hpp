// An independent, deliberately plain transcription of docs/model.md's dynamic program, with the
// recording overheads of docs/recording-overhead.md (fa[k] for F_all; fa = ft where a stage gives
// none, and then it is docs/model.md's DP), used as an
// oracle for the library's DP. It memoizes OPT(i, l, m) by recursion and shares nothing with
// include/remat/solvers/optimal.hpp, so the two agreeing means something. Two knobs reproduce the
// variants docs/model.md discusses: Rotor's tape-branch check, and the DP without the tape branch.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace remat::testing {

enum class tape_check : std::uint8_t {
  exact,  ///< docs/model.md: the forward of the tape branch holds g_{l+1}, of size x[l+1]
  rotor,  ///< Rotor's check: x[i+1], as in the base case of stage i
};

struct reference_options {
  bool tape_branch = true;  ///< false: the checkpoint-only DP (classical AD checkpointing)
  tape_check check = tape_check::exact;
};

class reference_dp {
 public:
  explicit reference_dp(const chain& c, reference_options o = {}) : o_(o) {
    L_ = static_cast<int>(c.length());
    const auto n = c.length();
    x_.assign(n + 2, 0);
    xb_.assign(n + 2, 0);
    fw_.assign(n + 1, 0);
    ft_.assign(n + 1, 0);
    fa_.assign(n + 1, 0);
    bw_.assign(n + 1, 0);
    bt_.assign(n + 1, 0);
    x_[0] = c.input_size;
    for (std::size_t k = 0; k < n; ++k) {
      x_[k + 1] = c.stages[k].output_size;
      xb_[k + 1] = c.stages[k].tape_size;
      fw_[k] = c.stages[k].forward_time;
      ft_[k] = c.stages[k].forward_overhead;
      fa_[k] = c.stages[k].recording_overhead.value_or(c.stages[k].forward_overhead);
      bw_[k] = c.stages[k].backward_time;
      bt_[k] = c.stages[k].backward_overhead;
    }
    bw_[n] = c.loss_time;
    bt_[n] = c.loss_overhead;
  }

  /// The least makespan of a persistent schedule within total budget `budget` (input included),
  /// or +infinity. Memory grows with the budget: for chains of small integer sizes.
  double operator()(size_type budget) {
    if (budget < x_[0]) return inf;
    return opt(0, L_, budget - x_[0]);
  }

  static constexpr double inf = std::numeric_limits<double>::infinity();

 private:
  static constexpr double unknown = -1;  // times are >= 0

  size_type x(int k) const { return x_[static_cast<std::size_t>(k)]; }
  size_type xb(int k) const { return xb_[static_cast<std::size_t>(k)]; }
  double fw(int k) const { return fw_[static_cast<std::size_t>(k)]; }
  size_type ft(int k) const { return ft_[static_cast<std::size_t>(k)]; }
  size_type fa(int k) const { return fa_[static_cast<std::size_t>(k)]; }
  double bw(int k) const { return bw_[static_cast<std::size_t>(k)]; }
  size_type bt(int k) const { return bt_[static_cast<std::size_t>(k)]; }

  // Memoized by (m, i, l), m-major so that the memo grows by appending as budgets grow.
  double opt(int i, int l, size_type m) {
    if (m < 0) return inf;
    const auto n = static_cast<std::size_t>(L_ + 1);
    const std::size_t at = (static_cast<std::size_t>(m) * n + static_cast<std::size_t>(i)) * n +
                           static_cast<std::size_t>(l);
    if (at >= memo_.size()) memo_.resize((static_cast<std::size_t>(m) + 1) * n * n, unknown);
    if (memo_[at] == unknown) memo_[at] = compute(i, l, m);
    return memo_[at];
  }

  double compute(int i, int l, size_type m) {
    if (i == L_) return m >= x(L_) + bt(L_) ? bw(L_) : inf;
    const bool backward_fits = m >= x(i) + x(i + 1) + xb(i + 1) + bt(i);
    if (i == l) return m >= x(i + 1) + xb(i + 1) + fa(i) && backward_fits ? fw(i) + bw(i) : inf;

    // In the exact DP no pruning bound: each branch checks the peaks of its own ops, nothing
    // else (the library's mmin must change nothing). Rotor's DP needs mmin, whose tape branch
    // check is not exact: mmin with each stage's cheaper forward (docs/recording-overhead.md).
    if (o_.check == tape_check::rotor) {
      auto cheaper = [&](int k) { return std::min(x(k + 1) + ft(k), xb(k + 1) + fa(k)); };
      size_type inner = cheaper(i);
      for (int k = i + 1; k < l; ++k) inner = std::max(inner, x(k) + cheaper(k));
      if (m < x(l + 1) + inner) return inf;
    }
    double best = inf;
    double forward = 0;
    for (int j = i + 1; j <= l; ++j) {
      forward += fw(j - 1);
      if (m < x(j)) continue;
      // F_ck(i), then F_none(i+1) .. F_none(j-1), all with g_{l+1} held.
      bool forwards_fit = m >= x(l + 1) + x(i + 1) + ft(i);
      for (int k = i + 1; k < j; ++k)
        forwards_fit = forwards_fit && m >= x(l + 1) + x(k) + x(k + 1) + ft(k);
      if (!forwards_fit) continue;
      best = std::min(best, forward + opt(j, l, m - x(j)) + opt(i, j - 1, m));
    }
    if (o_.tape_branch) {
      const size_type held_gradient = o_.check == tape_check::exact ? x(l + 1) : x(i + 1);
      if (m >= held_gradient + xb(i + 1) + fa(i) && backward_fits)
        best = std::min(best, fw(i) + bw(i) + opt(i + 1, l, m - xb(i + 1)));
    }
    return best;
  }

  reference_options o_;
  int L_ = 0;
  std::vector<size_type> x_, xb_, ft_, fa_, bt_;
  std::vector<double> fw_, bw_;
  std::vector<double> memo_;
};

}  // namespace remat::testing

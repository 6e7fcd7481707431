// The least-memory DP: for every interval the least m at which OPT(i, l, m) is finite, with no
// memory dimension (O(L^3)). It gives the least feasible budget of every solve, and the needs
// every engine starts its intervals from.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

namespace remat::detail {

// feasibility is a threshold in m because every condition of the DP is), and a choice that
// reaches it (same encoding as `reference_table::choice`). Among the choices that reach the least
// need, the one whose schedule (built from the sub-intervals' recorded schedules) is fastest is
// kept, ties to the tape branch, then to the smallest j. The time is a tie-break only: with slack
// in a sub-interval a faster schedule of the same peak may exist (`optimal` at that budget finds
// it). O(L^3) time, no dependence on the budget.
struct least_peak_table {
  std::vector<size_type> need;       // [interval]
  std::vector<double> time;          // [interval], the time of the recorded schedule
  std::vector<std::int32_t> choice;  // [interval], as `reference_table::choice`
};

constexpr least_peak_table least_peak_dp(const model& md,
                                         dp_branches branches = dp_branches::tape_and_checkpoint) {
  const std::int32_t L = md.L;
  least_peak_table t;
  t.need.assign(interval_count(L), unreachable);
  t.time.assign(interval_count(L), infinite_time);
  t.choice.assign(interval_count(L), -1);
  auto cell = [&](std::int32_t i, std::int32_t l) { return interval_index(L, i, l); };
  for (std::int32_t d = 0; d <= L; ++d) {
    for (std::int32_t i = 0; i + d <= L; ++i) {
      const std::int32_t l = i + d;
      size_type best = unreachable;
      double best_time = infinite_time;
      std::int32_t choice = -1;
      auto consider = [&](size_type need, double time, std::int32_t c) {
        if (need < best || (need == best && time < best_time)) {
          best = need;
          best_time = time;
          choice = c;
        }
      };
      if (i == L) {
        consider(loss_need(md), md.loss_time, 0);
      } else {
        // F_all(i, o) and B(i) with g_{l+1} held (the base case is l = i), for each option.
        const std::span<const tape_option> options = md.options(i);
        if (i == l) {
          for (std::size_t p = 0; p < options.size(); ++p) {
            const tape_branch base = tape_branch_of(md, i, i, options[p]);
            consider(base.own, base.time, tape_choice(p));
          }
        } else {
          const size_type mmin = necessary_memory(md, i, l);
          const std::size_t rest = cell(i + 1, l);  // every option's `tape_branch::rest`
          if (branches == dp_branches::tape_and_checkpoint && t.need[rest] != unreachable)
            for (std::size_t p = 0; p < options.size(); ++p) {
              const tape_branch b = tape_branch_of(md, i, l, options[p]);
              consider(std::max(b.need(t.need[rest]), mmin), b.value(t.time[rest]), tape_choice(p));
            }
          for (checkpoint_walk w(md, i, l); !w.done(); w.next()) {
            const std::size_t right = cell(w->right().i, w->right().l);
            const std::size_t left = cell(w->left().i, w->left().l);
            if (t.need[right] == unreachable || t.need[left] == unreachable) continue;
            consider(std::max(w->need(t.need[right], t.need[left]), mmin),
                     w->value(t.time[right], t.time[left]), w->j);
          }
        }
      }
      t.need[cell(i, l)] = best;
      t.time[cell(i, l)] = best_time;
      t.choice[cell(i, l)] = choice;
    }
  }
  return t;
}

// `least_peak_dp(md, branches).need` at run time, when every size of `md` and their total are
// below 2^52: doubles hold those integers exactly (and infinity is `unreachable`), so min and max
// give the same integers, from a loop over j that the compiler vectorizes. Column order; a
// column-major copy makes the needs (j, l) of column l contiguous. O(L^3) still, but it is called
// once per unit tried by `slots_min_budget`, and dominated the solve at L = 1000 otherwise.
constexpr bool need_in_doubles(const model& md) noexcept {
  constexpr double exact = 4503599627370496.0;  // 2^52
  double total = 0;
  for_each_size(md, [&total](size_type s) { total += static_cast<double>(s); });
  return total < exact;
}

inline std::vector<size_type> persistent_need_in_doubles(const model& md, dp_branches branches) {
  const std::int32_t L = md.L;
  const auto n = static_cast<std::size_t>(L) + 1;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  auto d = [](size_type s) { return static_cast<double>(s); };
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> row(interval_count(L), inf);  // [interval_index(i, l)]
  std::vector<double> col(n * n, inf);              // [l * n + i]
  std::vector<double> x(md.x.size());
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = d(md.x[k]);
  // checkpoint_forward_table, in doubles: row i's forwards(i, i + 1 + k) at
  // [interval_index(L, i, i) + k].
  const std::vector<size_type> forwards_table = checkpoint_forward_table(md);
  std::vector<double> forwards(forwards_table.size());
  for (std::size_t c = 0; c < forwards.size(); ++c) forwards[c] = d(forwards_table[c]);
  for (std::int32_t l = 0; l <= L; ++l) {
    double inner = -inf;  // max over i < k < l of x[k] + least_forward(k)
    for (std::int32_t i = l; i >= 0; --i) {
      double need = 0;
      if (i == L) {
        need = d(loss_need(md));
      } else {
        const std::span<const tape_option> options = md.options(i);
        if (i == l) {
          need = inf;
          for (const tape_option& o : options)
            need = std::min(need, d(tape_branch_of(md, i, i, o).own));
        } else {
          const double mmin = x[at(l + 1)] + std::max(d(least_forward(md, i)), inner);
          double best[4] = {inf, inf, inf, inf};
          if (branches == dp_branches::tape_and_checkpoint)
            for (const tape_option& o : options) {
              const tape_branch b = tape_branch_of(md, i, l, o);  // its `need`, in doubles
              best[0] =
                  std::min(best[0], std::max(d(b.own), d(b.held) + col[at(l) * n + at(i + 1)]));
            }
          // Branch j = i + 1 + k: `checkpoint_branch::need` in doubles, max(x[j] + need(j, l),
          // need(i, j - 1), own = x[l+1] + forwards(i, j)).
          const double* xs = x.data() + at(i + 1);
          const double* right = col.data() + at(l) * n + at(i + 1);
          const double* left = row.data() + interval_index(L, i, i);
          const double* fs = forwards.data() + interval_index(L, i, i);
          const double xl = x[at(l + 1)];
          const auto width = static_cast<std::size_t>(l - i);
          std::size_t k = 0;
          for (; k + 4 <= width; k += 4)
            for (std::size_t u = 0; u < 4; ++u)
              best[u] = std::min(best[u], std::max(std::max(xs[k + u] + right[k + u], left[k + u]),
                                                   xl + fs[k + u]));
          for (; k < width; ++k)
            best[0] = std::min(best[0], std::max(std::max(xs[k] + right[k], left[k]), xl + fs[k]));
          need = std::max(mmin, std::min(std::min(best[0], best[1]), std::min(best[2], best[3])));
        }
        if (i < l) inner = std::max(inner, x[at(i)] + d(least_forward(md, i)));
      }
      row[interval_index(L, i, l)] = need;
      col[at(l) * n + at(i)] = need;
    }
  }
  std::vector<size_type> out(row.size());
  for (std::size_t c = 0; c < row.size(); ++c)
    out[c] = row[c] == inf ? unreachable : static_cast<size_type>(row[c]);
  return out;
}

// The least m at which OPT(i, l, m) is finite, for every interval.
constexpr std::vector<size_type> persistent_need(
    const model& md, dp_branches branches = dp_branches::tape_and_checkpoint) {
  if (!std::is_constant_evaluated() && need_in_doubles(md))
    return persistent_need_in_doubles(md, branches);
  return least_peak_dp(md, branches).need;
}

// The smallest total budget (input included) at which a persistent schedule exists, in the
// units of `md`; `unreachable` if none. From the needs `persistent_need` gave, or computing them.
constexpr size_type persistent_min_budget(const model& md, const std::vector<size_type>& need) {
  const size_type root = need[interval_index(md.L, 0, md.L)];
  return root == unreachable ? unreachable : md.x[0] + root;
}

constexpr size_type persistent_min_budget(const model& md,
                                          dp_branches branches = dp_branches::tape_and_checkpoint) {
  return persistent_min_budget(md, persistent_need(md, branches));
}

}  // namespace remat::detail

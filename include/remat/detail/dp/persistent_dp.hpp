// The pieces of MODEL.md's persistent DP that do not depend on the memory dimension: interval
// indexing, the least-memory DP (`need`), the no-recomputation bounds of every interval (`store`,
// `S`), and the reconstruction of a schedule from per-cell choices. Shared by the reference DP
// (solvers/optimal.hpp) and the fast one (detail/dp/optimal_fast.hpp).
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::detail {

inline constexpr double infinite_time = std::numeric_limits<double>::infinity();
// A memory requirement no chain reaches (validated chains total at most 2^63 - 1 units).
inline constexpr size_type unreachable = std::numeric_limits<size_type>::max();

// Index of interval (i, l), 0 <= i <= l <= L, in a triangular array of (L+1)(L+2)/2 cells.
constexpr std::size_t interval_index(std::int32_t L, std::int32_t i, std::int32_t l) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  const auto ui = static_cast<std::size_t>(i);
  return ui * (2 * n - ui + 1) / 2 + static_cast<std::size_t>(l - i);
}

constexpr std::size_t interval_count(std::int32_t L) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  return n * (n + 1) / 2;
}

// With recording overheads (docs/recording-overhead.md) a forward of stage k peaks at
// x[k+1] + ft[k] above what it holds when it is F_none or F_ck, at xb[k+1] + fa[k] when it is
// F_all. `least_forward(md, k)` is the smaller: what any forward of stage k adds at its peak.
constexpr size_type least_forward(const model& md, std::int32_t k) noexcept {
  const auto at = static_cast<std::size_t>(k);
  return std::min(md.x[at + 1] + md.ft[at], md.xb[at + 1] + md.fa[at]);
}

// A lower bound of the memory of every persistent schedule of (i, l), i < l (MODEL.md's mmin,
// with recording overheads): each stage k in i .. l-1 runs forward at least once while g_{l+1}
// is held, its input held too (counted for k > i), so
//   mmin = x[l+1] + max(least_forward(i), max_{i<k<l} x[k] + least_forward(k)).
// With fa = ft, least_forward(k) = x[k+1] + ft[k] (xb >= x) and this is MODEL.md's mmin. It is a
// pruning bound only: the checkpoint branch checks its own forwards (`checkpoint_forwards`), the
// tape branch its F_all, so OPT below mmin is infinite by the branches' own conditions.
constexpr size_type necessary_memory(const model& md, std::int32_t i, std::int32_t l) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  size_type inner = least_forward(md, i);
  for (std::int32_t k = i + 1; k < l; ++k)
    inner = std::max(inner, md.x[at(k)] + least_forward(md, k));
  return md.x[at(l + 1)] + inner;
}

// `necessary_memory(md, i, l)` for every interval, at [interval_index(L, i, l)] (0 for i = l), in
// O(L^2): a row's inner max grows with l.
constexpr std::vector<size_type> necessary_memory_table(const model& md) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  std::vector<size_type> t(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i) {
    size_type inner = least_forward(md, i);
    for (std::int32_t l = i + 1; l <= md.L; ++l) {
      t[interval_index(md.L, i, l)] = md.x[at(l + 1)] + inner;
      inner = std::max(inner, md.x[at(l)] + least_forward(md, l));
    }
  }
  return t;
}

// The forwards the checkpoint branch of (i, l) at split point j runs before its right part,
// F_ck(i), F_none(i+1) .. F_none(j-1), peak at x[l+1] plus
//   forwards(i, j) = max(x[i+1] + ft[i], max_{i<k<j} x[k] + x[k+1] + ft[k])
// (g_{l+1} held throughout; F_none(k) holds a_k beside a_{k+1}). Non-decreasing in j. MODEL.md
// checks these peaks through mmin, whose terms for k >= j the right part's own cells imply when
// fa = ft; with fa < ft they no longer do (its F_all may peak lower), so the branch checks
// exactly its own forwards: m >= x[l+1] + forwards(i, j). With fa = ft this is the same DP.
// The table: forwards(i, j) at [interval_index(L, i, j - 1)] for 0 <= i < j <= L (a row's values
// are contiguous in j).
constexpr std::vector<size_type> checkpoint_forward_table(const model& md) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  std::vector<size_type> t(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i) {
    size_type f = md.x[at(i + 1)] + md.ft[at(i)];
    t[interval_index(md.L, i, i)] = f;
    for (std::int32_t j = i + 2; j <= md.L; ++j) {
      f = std::max(f, md.x[at(j - 1)] + md.x[at(j)] + md.ft[at(j - 1)]);
      t[interval_index(md.L, i, j - 1)] = f;
    }
  }
  return t;
}

// The tape ops of stage i in interval (i, l): F_all(i) with g_{l+1} held, and B(i) (also the base
// case, l = i).
constexpr size_type tape_ops_memory(const model& md, std::int32_t i, std::int32_t l) noexcept {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  return std::max(md.x[at(l + 1)] + md.xb[at(i + 1)] + md.fa[at(i)],
                  md.x[at(i)] + md.x[at(i + 1)] + md.xb[at(i + 1)] + md.bt[at(i)]);
}

// Which branches a DP may take. Without the tape branch (only F_ck/F_none, and F_all(i), B(i) as
// the base case) it is the heterogeneous form of classical AD checkpointing (MODEL.md).
enum class dp_branches : std::uint8_t {
  tape_and_checkpoint,  // MODEL.md's DP: the persistent schedules
  checkpoint_only,      // without the tape branch
};

// The least-memory DP: for every interval, the least m at which OPT(i, l, m) is finite (`need`:
// feasibility is a threshold in m because every condition of the DP is), and a choice that
// reaches it (same encoding as `optimal_table::choice`). Among the choices that reach the least
// need, the one whose schedule (built from the sub-intervals' recorded schedules) is fastest is
// kept, ties to the tape branch, then to the smallest j. The time is a tie-break only: with slack
// in a sub-interval a faster schedule of the same peak may exist (`optimal` at that budget finds
// it). O(L^3) time, no dependence on the budget.
struct least_peak_table {
  std::vector<size_type> need;       // [interval]
  std::vector<double> time;          // [interval], the time of the recorded schedule
  std::vector<std::int32_t> choice;  // [interval], 0: tape branch or base case, j > 0: checkpoint
};

constexpr least_peak_table least_peak_dp(const model& md,
                                         dp_branches branches = dp_branches::tape_and_checkpoint) {
  const std::int32_t L = md.L;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
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
        consider(md.x[at(L)] + md.bt[at(L)], md.bw[at(L)], 0);
      } else {
        // F_all(i) and B(i) with g_{l+1} held (the base case is l = i).
        const size_type tape_ops = tape_ops_memory(md, i, l);
        if (i == l) {
          consider(tape_ops, md.fw[at(i)] + md.bw[at(i)], 0);
        } else {
          const size_type mmin = necessary_memory(md, i, l);
          const size_type rest = t.need[cell(i + 1, l)];
          if (branches == dp_branches::tape_and_checkpoint && rest != unreachable)
            consider(std::max({tape_ops, md.xb[at(i + 1)] + rest, mmin}),
                     md.fw[at(i)] + md.bw[at(i)] + t.time[cell(i + 1, l)], 0);
          double forward = 0;
          size_type forwards = 0;  // checkpoint_forward_table's forwards(i, j)
          for (std::int32_t j = i + 1; j <= l; ++j) {
            forward += md.fw[at(j - 1)];
            forwards = j == i + 1
                           ? md.x[at(i + 1)] + md.ft[at(i)]
                           : std::max(forwards, md.x[at(j - 1)] + md.x[at(j)] + md.ft[at(j - 1)]);
            const size_type right = t.need[cell(j, l)];
            const size_type left = t.need[cell(i, j - 1)];
            if (right == unreachable || left == unreachable) continue;
            consider(std::max({md.x[at(j)] + right, left, mmin, md.x[at(l + 1)] + forwards}),
                     forward + t.time[cell(j, l)] + t.time[cell(i, j - 1)], j);
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
  for (const std::vector<size_type>* v : {&md.x, &md.xb, &md.ft, &md.fa, &md.bt})
    for (const size_type s : *v) total += static_cast<double>(s);
  return total < exact;
}

inline std::vector<size_type> persistent_need_fast(const model& md, dp_branches branches) {
  const std::int32_t L = md.L;
  const auto n = static_cast<std::size_t>(L) + 1;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  auto d = [](size_type s) { return static_cast<double>(s); };
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> row(interval_count(L), inf);  // [interval_index(i, l)]
  std::vector<double> col(n * n, inf);              // [l * n + i]
  std::vector<double> x(md.x.size());
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = d(md.x[k]);
  // checkpoint_forward_table, in doubles: row i's forwards(i, i + 1 + k) at [interval_index(L, i,
  // i) + k].
  const std::vector<size_type> forwards_table = checkpoint_forward_table(md);
  std::vector<double> forwards(forwards_table.size());
  for (std::size_t c = 0; c < forwards.size(); ++c) forwards[c] = d(forwards_table[c]);
  for (std::int32_t l = 0; l <= L; ++l) {
    double inner = -inf;  // max over i < k < l of x[k] + least_forward(k)
    for (std::int32_t i = l; i >= 0; --i) {
      double need = 0;
      if (i == L) {
        need = d(md.x[at(L)] + md.bt[at(L)]);
      } else {
        const double tape_ops = d(tape_ops_memory(md, i, l));
        if (i == l) {
          need = tape_ops;
        } else {
          const double mmin = x[at(l + 1)] + std::max(d(least_forward(md, i)), inner);
          double best[4] = {inf, inf, inf, inf};
          if (branches == dp_branches::tape_and_checkpoint)
            best[0] = std::max(tape_ops, d(md.xb[at(i + 1)]) + col[at(l) * n + at(i + 1)]);
          // Branch j = i + 1 + k: max(x[j] + need(j, l), need(i, j - 1), x[l+1] + forwards(i, j)).
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
    return persistent_need_fast(md, branches);
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

// Adds sizes that may be `unreachable`, saturating there.
constexpr size_type add_or_unreachable(size_type a, size_type b) noexcept {
  return a == unreachable || b == unreachable ? unreachable : a + b;
}

// What bounds OPT(i, l, .) for every interval, whatever the budget:
// * need: the least m at which OPT(i, l, m) is finite (`persistent_need`);
// * store: the least m at which the sub-schedule without recomputation (F_all(i .. l-1), then
//   the backwards) fits with g_{l+1} held: store(L, L) = x[L] + bt[L], store(i, i) = the tape
//   ops of stage i, store(i, l) = max(tape ops of stage i with g_{l+1}, xb[i+1] + store(i+1, l));
//   `unreachable` for i < l without the tape branch, where no schedule avoids recomputation;
// * S: that sub-schedule's time, fw[i] + bw[i] + S(i+1, l), summed in the order of the tape
//   branch. Every schedule of the interval runs each of its forwards at least once and each
//   backward once, so in exact arithmetic S <= OPT(i, l, m) for every m, with equality from
//   store on. The DPs use both facts as rules (see `optimal_cell`).
struct interval_bounds {
  std::vector<size_type> need;  // [interval]
  std::vector<size_type> store;
  std::vector<double> S;
};

// The last m at which the DPs store OPT(i, l, m) for interval c in a table up to M: from store on
// it is S (never, without the tape branch, where store is `unreachable`). Below `b.need[c]` when
// nothing is stored.
constexpr size_type stored_top(const interval_bounds& b, std::size_t c, size_type M) noexcept {
  return b.store[c] == unreachable ? M : std::min(b.store[c] - 1, M);
}

constexpr interval_bounds make_interval_bounds(const model& md, std::vector<size_type> need,
                                               dp_branches branches) {
  const std::int32_t L = md.L;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  interval_bounds b;
  b.need = std::move(need);
  b.store.assign(interval_count(L), 0);
  b.S.assign(interval_count(L), 0);
  for (std::int32_t l = 0; l <= L; ++l) {
    for (std::int32_t i = l; i >= 0; --i) {
      const std::size_t c = interval_index(L, i, l);
      if (i == L) {
        b.store[c] = md.x[at(L)] + md.bt[at(L)];
        b.S[c] = md.bw[at(L)];
        continue;
      }
      const size_type tape_ops = tape_ops_memory(md, i, l);
      if (i == l) {
        b.store[c] = tape_ops;
        b.S[c] = md.fw[at(i)] + md.bw[at(i)];
      } else {
        const std::size_t rest = interval_index(L, i + 1, l);
        b.store[c] = branches == dp_branches::tape_and_checkpoint
                         ? std::max(tape_ops, md.xb[at(i + 1)] + b.store[rest])
                         : unreachable;
        b.S[c] = md.fw[at(i)] + md.bw[at(i)] + b.S[rest];
      }
    }
  }
  return b;
}

// The schedule of cell (i, l, m), without recursion (chains can be long). `choice_of(i, l, m)`
// gives the cell's choice in the encoding of `optimal_table::choice`.
template <class ChoiceOf>
constexpr std::vector<op> persistent_ops(const model& md, std::int32_t i, std::int32_t l,
                                         size_type m, ChoiceOf choice_of) {
  struct task {
    bool emit;  // emit `o`, or expand (i, l, m)
    op o;
    std::int32_t i, l;
    size_type m;
  };
  std::vector<op> ops;
  std::vector<task> stack{{false, {}, i, l, m}};
  while (!stack.empty()) {
    const task tk = stack.back();
    stack.pop_back();
    if (tk.emit) {
      ops.push_back(tk.o);
      continue;
    }
    const std::int32_t c = choice_of(tk.i, tk.l, tk.m);
    if (tk.i == md.L) {
      ops.push_back(loss_op(md.L));
    } else if (tk.i == tk.l) {
      ops.push_back(f_all(tk.i));
      ops.push_back(backward(tk.i));
    } else if (c == 0) {
      ops.push_back(f_all(tk.i));
      stack.push_back({true, backward(tk.i), 0, 0, 0});
      stack.push_back(
          {false, {}, tk.i + 1, tk.l, tk.m - md.xb[static_cast<std::size_t>(tk.i) + 1]});
    } else {
      ops.push_back(f_ck(tk.i));
      for (std::int32_t k = tk.i + 1; k < c; ++k) ops.push_back(f_none(k));
      stack.push_back({false, {}, tk.i, c - 1, tk.m});
      stack.push_back({false, {}, c, tk.l, tk.m - md.x[static_cast<std::size_t>(c)]});
    }
  }
  return ops;
}

}  // namespace remat::detail

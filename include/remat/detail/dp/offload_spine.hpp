// The offload DP of docs/offload.md: the persistent DP of docs/model.md whose top-level
// ("spine") cells may offload their input while their forward runs and prefetch it back during
// the last op of the cell below them. docs/offload.md states the class of schedules and proves
// that the DP is the fastest in it.
//
// A spine cell is (i, L, m) with its input item held outside m: a_i (kind `activation`, reached
// from a checkpoint branch or the root) or t_i (kind `tape`, reached from a tape branch). Its
// branches are those of docs/model.md, with OPT(j, L, .) replaced by the spine cell of j, and each
// of them also with the item offloaded:
// * O(item) is issued right after the cell's first op (the item's only reader in the forward), so
//   it starts with that op; W(item) is issued before the first forward op whose peak needs the
//   item's bytes, or before the cell below when none does: from the W on, the cell has m + s.
//   The W costs max(0, offload time - the time from the cell's start to the W's place).
// * P(item) is issued right after the last op of the cell below (B(j), or the loss), so it
//   overlaps that op: its peak, a fixed quantity of the cell below (`final_peak`), must fit with
//   s more; else W(item), P(item): the prefetch starts when that op ends. The cell's next op
//   reads the item: the prefetch costs max(0, prefetch time - that op's time), or all of it.
// Memory never depends on timing: every relief comes after a W, and a prefetch's bytes are
// counted from the start of the op it overlaps.
//
// Options (docs/model.md): a spine cell's tape branch records its stage with the stage's fastest
// option (`spine_option`), so that the item t_i has one size; the cells below the spine (the
// left parts of checkpoint branches, read from the in-core DP's table) take every option.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/dense_table.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail {

// The option a spine cell's tape branch records stage k with: its fastest.
constexpr const tape_option& spine_option(const model& md, std::int32_t k) noexcept {
  return md.options(k)[md.fastest[static_cast<std::size_t>(k)]];
}

// The choice of a spine cell: -1 infeasible; else (j << 2) | (offloaded << 1) | overlapped, j = 0
// for the tape branch (the loss cell: 0).
struct spine_choice {
  std::int32_t j = 0;
  bool offloaded = false;
  bool overlapped = false;

  static constexpr std::int32_t encode(std::int32_t j, bool offloaded, bool overlapped) {
    return (j << 2) | (offloaded ? 2 : 0) | (overlapped ? 1 : 0);
  }
  static constexpr spine_choice decode(std::int32_t c) {
    return {c >> 2, (c & 2) != 0, (c & 1) != 0};
  }
};

// The bytes of the spine table over m in [0, M] (values and choices, both kinds of item).
constexpr double offload_spine_bytes(std::int32_t L, size_type M) noexcept {
  return 2.0 * (static_cast<double>(L) + 1) * (static_cast<double>(M) + 1) *
         (sizeof(double) + sizeof(std::int32_t));
}

// The spine table over m in [0, M], for both kinds of input item.
class offload_spine {
 public:
  // `md`: the model in units; `c`: the chain's own sizes and bandwidths (transfer times); `t`:
  // OPT(i, l, m) of the persistent DP on `md` for every m <= M.
  offload_spine(const model& md, const chain& c, const dense_table& t, size_type M)
      : md_(md), c_(c), t_(t), M_(M), L_(md.L) {
    const std::size_t cells =
        2 * (static_cast<std::size_t>(L_) + 1) * (static_cast<std::size_t>(M) + 1);
    value_.assign(cells, infinite_time);
    choice_.assign(cells, -1);
    for (std::int32_t i = L_; i >= 0; --i)
      for (const tensor_kind kind : {tensor_kind::activation, tensor_kind::tape}) {
        if (kind == tensor_kind::tape && i == 0) continue;
        for (size_type m = 0; m <= M_; ++m) fill(i, kind, m);
      }
  }

  [[nodiscard]] double value(std::int32_t i, tensor_kind kind, size_type m) const {
    return value_[at(i, kind, std::min(m, M_))];
  }

  // The ops of spine cell (0, L, m) with a_0 as its item, and the cells below it.
  [[nodiscard]] std::vector<op> ops(size_type m) const {
    struct frame {
      std::int32_t i;
      size_type m;
      tensor_kind kind;
      spine_choice ch;
    };
    std::vector<frame> spine;
    std::vector<op> out;
    std::int32_t i = 0;
    tensor_kind kind = tensor_kind::activation;
    while (i < L_) {
      const spine_choice ch = spine_choice::decode(choice_[at(i, kind, m)]);
      spine.push_back({i, m, kind, ch});
      const size_type s = item(i, kind);
      if (ch.j == 0) {
        out.push_back(f_all(i, spine_option(md_, i).index));
        if (ch.offloaded) {
          out.push_back(offload(i, kind));
          out.push_back(wait_for(i, kind));
        }
        m = child_m(m, ch.offloaded ? s : 0, spine_option(md_, i).xb);
        i += 1;
        kind = tensor_kind::tape;
      } else {
        out.push_back(f_ck(i));
        if (ch.offloaded) out.push_back(offload(i, kind));
        bool waited = !ch.offloaded;
        for (std::int32_t k = i + 1; k < ch.j; ++k) {
          if (!waited && f_none_peak(md_, k) > m) {
            out.push_back(wait_for(i, kind));
            waited = true;
          }
          out.push_back(f_none(k));
        }
        if (!waited) out.push_back(wait_for(i, kind));
        m = child_m(m, ch.offloaded ? s : 0, md_.x[idx(ch.j)]);
        i = ch.j;
        kind = tensor_kind::activation;
      }
    }
    out.push_back(loss_op(L_));
    for (auto f = spine.rbegin(); f != spine.rend(); ++f) {
      if (f->ch.offloaded) {
        if (!f->ch.overlapped) out.push_back(wait_for(f->i, f->kind));
        out.push_back(prefetch(f->i, f->kind));
      }
      if (f->ch.j == 0) {
        out.push_back(backward(f->i));
      } else {
        const std::vector<op> left = persistent_ops(
            md_, f->i, f->ch.j - 1, f->m, [&](std::int32_t a, std::int32_t b, size_type mm) {
              return t_.choice_at(md_, a, b, mm);
            });
        out.insert(out.end(), left.begin(), left.end());
      }
    }
    return out;
  }

 private:
  static constexpr std::size_t idx(std::int32_t k) { return static_cast<std::size_t>(k); }
  std::size_t at(std::int32_t i, tensor_kind kind, size_type m) const {
    return (2 * idx(i) + (kind == tensor_kind::tape ? 1 : 0)) * (static_cast<std::size_t>(M_) + 1) +
           static_cast<std::size_t>(m);
  }
  // The item's size in units, and its transfer times from its size in the chain.
  size_type item(std::int32_t i, tensor_kind kind) const {
    return kind == tensor_kind::tape ? spine_option(md_, i - 1).xb : md_.x[idx(i)];
  }
  double bytes(std::int32_t i, tensor_kind kind) const {
    if (kind == tensor_kind::tape)
      return static_cast<double>(
          option_at(c_.stages[idx(i - 1)], spine_option(md_, i - 1).index).tape_size);
    return static_cast<double>(i == 0 ? c_.input_size : c_.stages[idx(i - 1)].output_size);
  }
  // The peak of the last op of spine cell j (B(j) with g_{j+1} and t_{j+1}, or the loss), and
  // its time.
  size_type final_peak(std::int32_t j) const {
    if (j == L_) return loss_need(md_);
    const tape_option& o = spine_option(md_, j);
    return md_.x[idx(j + 1)] + o.xb + md_.x[idx(j)] + o.bt;
  }
  // The budget of the cell below: m, plus the item where it was offloaded, minus the new item;
  // above M (only in cells no solve reaches) the value at M stands in for it, which is feasible.
  size_type child_m(size_type m, size_type freed, size_type taken) const {
    return std::min(M_, m + freed - taken);
  }
  // The prefetch's cost: overlapping the last op of the cell below where its peak fits with the
  // item (m_below: that cell's budget), else after it.
  double prefetch_cost(std::int32_t below, size_type m_below, size_type s, double time) const {
    if (final_peak(below) + s <= m_below)
      return std::max(0.0, time - (below == L_ ? md_.loss_time : spine_option(md_, below).bw));
    return time;
  }
  bool overlaps(std::int32_t below, size_type m_below, size_type s) const {
    return final_peak(below) + s <= m_below;
  }

  // What moving a cell's item costs: its size in units, whether it can move (a link, bytes to
  // move), and its offload and prefetch times.
  struct item_moves {
    size_type s = 0;
    bool transfers = false;
    double out_time = 0;
    double in_time = 0;
  };
  item_moves moves_of(std::int32_t i, tensor_kind kind) const {
    item_moves v;
    v.s = item(i, kind);
    v.transfers = c_.transfer.available() && v.s > 0;
    v.out_time = v.transfers ? bytes(i, kind) / c_.transfer.offload_bandwidth : 0;
    v.in_time = v.transfers ? bytes(i, kind) / c_.transfer.prefetch_bandwidth : 0;
    return v;
  }

  // The tape branch of spine cell (i, L, m): F_all(i), the spine cell of i + 1 holding t_{i+1},
  // B(i); the item kept (`tape_branch`), or offloaded during F_all(i) and prefetched back for
  // B(i).
  template <class Consider>
  [[gnu::always_inline]] inline void tape_branches(std::int32_t i, size_type m,
                                                   const item_moves& moves,
                                                   Consider& consider) const {
    const size_type s = moves.s;
    const tape_option& recorded = spine_option(md_, i);
    const double fw = recorded.fw;
    const double bw = recorded.bw;
    const size_type xb1 = recorded.xb;
    const tape_branch kept = tape_branch_of(md_, i, L_, recorded);
    if (m < kept.own) return;
    const double rest = value(kept.rest().i, tensor_kind::tape, kept.rest().memory(m));
    if (rest < infinite_time) consider(kept.value(rest), 0, false, false);
    if (!moves.transfers) return;
    const size_type below = child_m(m, s, xb1);
    const double r = value(i + 1, tensor_kind::tape, below);
    if (r < infinite_time) {
      const double stall = std::max(0.0, moves.out_time - fw);
      consider(fw + stall + r + prefetch_cost(i + 1, below, s, moves.in_time) + bw, 0, true,
               overlaps(i + 1, below, s));
    }
  }

  void fill(std::int32_t i, tensor_kind kind, size_type m) {
    const std::size_t cell = at(i, kind, m);
    if (i == L_) {
      value_[cell] = t_.get(L_, L_, m);
      choice_[cell] = value_[cell] < infinite_time ? 0 : -1;
      return;
    }
    // The item's transfers, and the running least, as locals: the loops keep them in registers.
    const item_moves moves = moves_of(i, kind);
    const size_type s = moves.s;
    const bool transfers = moves.transfers;
    const double out_time = moves.out_time;
    const double in_time = moves.in_time;
    double best = infinite_time;
    std::int32_t choice = -1;
    auto consider = [&](double v, std::int32_t j, bool offloaded, bool overlapped) {
      if (v < best) {
        best = v;
        choice = spine_choice::encode(j, offloaded, overlapped);
      }
    };
    tape_branches(i, m, moves, consider);
    // The checkpoint branches: F_ck(i), F_none(i+1 .. j-1), the spine cell of j holding a_j, then
    // the interval (i, j-1) holding a_i; none where F_ck(i)'s peak does not fit.
    checkpoint_walk w(md_, i, L_);
    if (w->forwards > m) {  // F_ck(i)'s peak
      value_[cell] = best;
      choice_[cell] = choice;
      return;
    }
    bool kept_fits = true;     // every forward so far fits m (no offload needed)
    bool offload_fits = true;  // every forward so far fits m + s after the W
    double wait_at = -1;       // where the W goes: the start of the first forward needing s
    double before = 0;         // the time of the forwards before F_none(j - 1)
    for (; !w.done(); w.next()) {
      const std::int32_t j = w->j;
      if (j > i + 1) {
        const size_type peak = f_none_peak(md_, j - 1);
        if (peak > m) {
          kept_fits = false;
          if (wait_at < 0) wait_at = before;
          if (peak > m + s) offload_fits = false;
        }
      }
      before = w->forward;
      if (!kept_fits && !(transfers && offload_fits)) break;
      const branch_part left_part = w->left();
      const double left = t_.get(left_part.i, left_part.l, left_part.memory(m));
      if (!(left < infinite_time)) continue;
      if (kept_fits && m >= w->own) {  // a_j kept: docs/model.md's checkpoint branch
        const branch_part right_part = w->right();
        const double right = value(right_part.i, tensor_kind::activation, right_part.memory(m));
        if (right < infinite_time) consider(w->value(right, left), j, false, false);
      }
      const size_type xj = w->held;
      if (transfers && offload_fits && m + s >= xj) {
        const size_type below = child_m(m, s, xj);
        const double right = value(j, tensor_kind::activation, below);
        if (right < infinite_time) {
          const double stall = std::max(0.0, out_time - (wait_at < 0 ? w->forward : wait_at));
          consider(w->forward + stall + right + prefetch_cost(j, below, s, in_time) + left, j, true,
                   overlaps(j, below, s));
        }
      }
    }
    value_[cell] = best;
    choice_[cell] = choice;
  }

  const model& md_;
  const chain& c_;
  const dense_table& t_;
  size_type M_;
  std::int32_t L_;
  std::vector<double> value_;
  std::vector<std::int32_t> choice_;
};

// The least m at which spine cell (0, L, m) with a_0 offloadable is feasible, on `md`'s sizes
// (`need`: persistent_need of `md`); `unreachable` where none is.
inline size_type offload_spine_need(const model& md, const std::vector<size_type>& need,
                                    bool transfers) {
  const std::int32_t L = md.L;
  auto idx = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  // need_of[2 * i + kind]
  std::vector<size_type> need_of(2 * (idx(L) + 1), unreachable);
  auto opt_need = [&](std::int32_t i, std::int32_t l) { return need[interval_index(L, i, l)]; };
  auto plus = [](size_type a, size_type b) { return add_or_unreachable(a, b); };
  for (std::int32_t i = L; i >= 0; --i)
    for (int kind = 0; kind < 2; ++kind) {
      if (kind == 1 && i == 0) continue;
      size_type& out = need_of[2 * idx(i) + static_cast<std::size_t>(kind)];
      if (i == L) {
        out = opt_need(L, L);
        continue;
      }
      const size_type s =
          transfers ? (kind == 1 ? spine_option(md, i - 1).xb : md.x[idx(i)]) : 0;
      // Below the cell's budget by the item where it is offloaded (never below 0).
      auto relieved = [&](size_type v) {
        return v == unreachable ? v : std::max<size_type>(0, v - s);
      };
      size_type best = unreachable;
      const size_type tape_below = need_of[2 * idx(i + 1) + 1];
      const tape_branch tape = tape_branch_of(md, i, L, spine_option(md, i));
      best = std::min(best, std::max(tape.own, relieved(plus(tape.held, tape_below))));
      const size_type forwards = f_ck_peak(md, i);
      size_type relieved_forwards = 0;
      for (std::int32_t j = i + 1; j <= L; ++j) {
        if (j > i + 1)
          relieved_forwards = std::max(relieved_forwards, relieved(f_none_peak(md, j - 1)));
        const size_type below = plus(md.x[idx(j)], need_of[2 * idx(j)]);
        const size_type v = std::max({forwards, relieved_forwards, relieved(below),
                                      opt_need(i, j - 1), relieved(md.x[idx(j)])});
        best = std::min(best, v);
      }
      out = best;
    }
  return need_of[0];
}

}  // namespace remat::detail

// docs/model.md's arrays (x, fw, ft; the loss's bw[L], bt[L]) and each stage's options of its
// recording forward and backward (fw_o, bw_o, xb_o, and their overheads: ft_o, the recording
// overhead fa of docs/recording-overhead.md for a stage without options, and bt_o), with sizes
// rounded up to a memory unit.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace remat::detail {

// One option of a stage k (docs/model.md, "Several options per stage"): F_all(k, o) takes time
// fw and overhead fa and leaves the tape t_{k+1} of size xb; B(k) then takes time bw and
// overhead bt. `index` is its position in the stage's list (what F_all(k, o) names).
struct tape_option {
  double fw = 0;
  double bw = 0;
  size_type xb = 0;
  size_type fa = 0;
  size_type bt = 0;
  std::uint16_t index = 0;
  friend constexpr bool operator==(const tape_option&, const tape_option&) = default;
};

// Whether `b` makes `a` useless to the DPs: no larger tape, overheads or times.
constexpr bool dominates(const tape_option& b, const tape_option& a) noexcept {
  return b.xb <= a.xb && b.fa <= a.fa && b.bt <= a.bt && b.fw <= a.fw && b.bw <= a.bw;
}

struct model {
  std::int32_t L = 0;
  std::vector<size_type> x;   // x[0..L+1], x[L+1] = 0
  std::vector<double> fw;     // fw[0..L], fw[L] = 0: time of F_none(k) and F_ck(k)
  std::vector<size_type> ft;  // ft[0..L], ft[L] = 0: overhead of F_none(k) and F_ck(k)
  double loss_time = 0;       // bw[L]
  size_type loss_overhead = 0;  // bt[L]
  // The options the DPs consider: stage k's are opts[first[k] .. first[k+1]) (first[L] =
  // first[L+1]: the loss has none), in the order of the stage's list, without those another of
  // the stage dominates (`dominates`; of equal ones the first is kept): dropping them changes no
  // OPT. A stage without options has one, of its own fields.
  std::vector<std::size_t> first;
  std::vector<tape_option> opts;
  // fb[k], k < L: the least fw_o + bw_o over stage k's options; `fastest[k]` the first option
  // (position in opts of the stage) reaching it. fb[L] = the loss time.
  std::vector<double> fb;
  std::vector<std::uint16_t> fastest;
  // Every option as listed, for `to_chain`: stage k's are listed[listed_first[k] ..
  // listed_first[k+1]); `has_list[k]`: the stage lists options (else its one is its own fields).
  std::vector<std::size_t> listed_first;
  std::vector<tape_option> listed;
  std::vector<std::uint8_t> has_list;
  // The times fw and bw are whole multiples of a power of two q such that every sum the DPs form
  // stays below 2^53 q (`quantize_times`): double additions of them are then exact, so every
  // order of summation gives the same bits. False only for chains whose times come within a
  // factor of about 8 (L + 1) of the largest double: those times are kept as given.
  bool exact_sums = false;
  double time_quantum = 0;  // q where exact_sums, else 0

  // The options of stage k < L the DPs consider.
  [[nodiscard]] constexpr std::span<const tape_option> options(std::int32_t k) const noexcept {
    const auto at = static_cast<std::size_t>(k);
    return {opts.data() + first[at], first[at + 1] - first[at]};
  }
  // Whether some stage has more than one option the DPs consider.
  [[nodiscard]] constexpr bool has_options() const noexcept {
    return opts.size() > static_cast<std::size_t>(L);
  }
};

// Calls `f` on every size of `m` the DPs read (x, ft, the loss's overhead, each considered
// option's xb, fa and bt), as a reference when `M` is a non-const model.
template <class M, class F>
constexpr void for_each_size(M& m, F&& f) {
  for (auto& s : m.x) f(s);
  for (auto& s : m.ft) f(s);
  f(m.loss_overhead);
  for (auto& o : m.opts) {
    f(o.xb);
    f(o.fa);
    f(o.bt);
  }
}

// 2^e as a double, for -1074 <= e <= 1023, in constant evaluation too.
constexpr double power_of_two(int e) noexcept {
  double p = 1;
  for (; e > 0; --e) p *= 2;
  for (; e < 0; ++e) p /= 2;
  return p;
}

// Rounds the times of `m` to whole multiples of q = 2^e, the least power of two with 8 V <= 2^53 q,
// where V = (L + 1) sum(fw) + sum(bw) bounds the time of any persistent schedule of any interval
// (no stage runs forward more than L + 1 times). Every quantity a DP adds up (a branch value, a
// prefix of 2 fw + bw plus a value) is below 4 V, so it is an integer multiple of q below 2^53 q:
// a double holds it exactly and additions do not round. The change to each time is at most q / 2,
// below 2^-50 of V (about 2^-40 of the chain's own time at 1000 stages): the order of the
// rounding the sums would otherwise carry. Times already multiples of q (small integers, halves,
// ...) are unchanged.
//
// A stage's forward counts with the largest of fw and its options' fw_o, its backward with the
// largest bw_o (with one option of the stage's own fields, fw and bw).
constexpr void quantize_times(model& m) noexcept {
  const auto repeats = static_cast<double>(m.L + 1);
  double v = 0;  // finite: validation checks this very sum
  for (std::int32_t k = 0; k < m.L; ++k) {
    const auto at = static_cast<std::size_t>(k);
    double forward = m.fw[at];
    double backward = 0;
    for (std::size_t o = m.listed_first[at]; o < m.listed_first[at + 1]; ++o) {
      forward = std::max(forward, m.listed[o].fw);
      backward = std::max(backward, m.listed[o].bw);
    }
    v += repeats * forward + backward;
  }
  v += m.loss_time;
  if (!(v <= power_of_two(1019))) return;  // 8 V would pass 2^1022: keep the times as given
  int e = -1074;
  for (double p = power_of_two(e + 53); p < 8 * v; p *= 2) ++e;  // p = 2^(e + 53)
  const double q = power_of_two(e);
  auto round_to_q = [q](double t) {
    const double n = t / q;  // exact: q is a power of two, and n < 2^53
    auto whole = static_cast<double>(static_cast<std::int64_t>(n));
    if (n - whole >= 0.5) whole += 1;
    return whole * q;
  };
  for (double& t : m.fw) t = round_to_q(t);
  for (tape_option& o : m.listed) {
    o.fw = round_to_q(o.fw);
    o.bw = round_to_q(o.bw);
  }
  m.loss_time = round_to_q(m.loss_time);
  m.exact_sums = true;
  m.time_quantum = q;
}

// ceil(s / unit) without overflow, for s >= 0 and unit >= 1.
constexpr size_type round_up(size_type s, size_type unit) noexcept {
  return s / unit + (s % unit != 0 ? 1 : 0);
}

// Fills `first`, `opts`, `fb` and `fastest` from `listed`: each stage's options without the
// dominated ones.
constexpr void keep_undominated(model& m) {
  const auto n = static_cast<std::size_t>(m.L);
  m.first.assign(n + 2, 0);
  m.opts.clear();
  m.opts.reserve(m.listed.size());
  m.fb.assign(n + 1, 0);
  m.fastest.assign(n, 0);
  for (std::size_t k = 0; k < n; ++k) {
    m.first[k] = m.opts.size();
    const std::size_t b = m.listed_first[k];
    const std::size_t e = m.listed_first[k + 1];
    for (std::size_t a = b; a < e; ++a) {
      bool dropped = false;
      for (std::size_t d = b; d < e && !dropped; ++d)
        dropped = d != a && dominates(m.listed[d], m.listed[a]) &&
                  (d < a || !dominates(m.listed[a], m.listed[d]));
      if (!dropped) m.opts.push_back(m.listed[a]);
    }
    double least = m.opts[m.first[k]].fw + m.opts[m.first[k]].bw;
    for (std::size_t o = m.first[k] + 1; o < m.opts.size(); ++o) {
      const double t = m.opts[o].fw + m.opts[o].bw;
      if (t < least) {
        least = t;
        m.fastest[k] = static_cast<std::uint16_t>(o - m.first[k]);
      }
    }
    m.fb[k] = least;
  }
  m.first[n] = m.first[n + 1] = m.opts.size();
  m.fb[n] = m.loss_time;
}

// The model of a validated chain, every size rounded up to whole `unit`s (1: sizes as given).
constexpr model make_model(const chain& c, size_type unit) {
  model m;
  m.L = static_cast<std::int32_t>(c.length());
  const auto n = c.length();
  m.x.assign(n + 2, 0);
  m.fw.assign(n + 1, 0);
  m.ft.assign(n + 1, 0);
  m.listed_first.assign(n + 1, 0);
  m.has_list.assign(n, 0);
  m.x[0] = round_up(c.input_size, unit);
  for (std::size_t k = 0; k < n; ++k) {
    const stage& s = c.stages[k];
    m.x[k + 1] = round_up(s.output_size, unit);
    m.fw[k] = s.forward_time;
    m.ft[k] = round_up(s.forward_overhead, unit);
    m.listed_first[k] = m.listed.size();
    m.has_list[k] = s.options.empty() ? 0 : 1;
    for (std::size_t o = 0; o < option_count(s); ++o) {
      const stage_option p = option_at(s, o);
      m.listed.push_back({p.forward_time, p.backward_time, round_up(p.tape_size, unit),
                          round_up(p.forward_overhead, unit), round_up(p.backward_overhead, unit),
                          static_cast<std::uint16_t>(o)});
    }
  }
  m.listed_first[n] = m.listed.size();
  m.loss_time = c.loss_time;
  m.loss_overhead = round_up(c.loss_overhead, unit);
  quantize_times(m);
  keep_undominated(m);
  return m;
}

// The chain whose sizes (and times) are those of `m` (for replaying in units), every option as
// listed.
constexpr chain to_chain(const model& m) {
  chain c;
  const auto n = static_cast<std::size_t>(m.L);
  c.stages.resize(n);
  c.input_size = m.x[0];
  for (std::size_t k = 0; k < n; ++k) {
    const tape_option& own = m.listed[m.listed_first[k]];
    c.stages[k] = {m.fw[k], own.bw, m.x[k + 1], own.xb, m.ft[k], own.bt, {}, {}};
    if (m.has_list[k] != 0) {
      for (std::size_t o = m.listed_first[k]; o < m.listed_first[k + 1]; ++o)
        c.stages[k].options.push_back(
            {m.listed[o].fw, m.listed[o].bw, m.listed[o].xb, m.listed[o].fa, m.listed[o].bt});
    } else if (own.fa != m.ft[k]) {
      c.stages[k].recording_overhead = own.fa;
    }
  }
  c.loss_time = m.loss_time;
  c.loss_overhead = m.loss_overhead;
  return c;
}

}  // namespace remat::detail

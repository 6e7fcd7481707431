// docs/model.md's arrays (x, xb, fw, ft, bw, bt), and the recording-forward overhead fa of
// docs/recording-overhead.md (fa = ft where a stage gives none), with sizes rounded up to a
// memory unit.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail {

struct model {
  std::int32_t L = 0;
  std::vector<size_type> x;   // x[0..L+1], x[L+1] = 0
  std::vector<size_type> xb;  // xb[0..L+1], xb[0] and xb[L+1] = 0
  std::vector<double> fw;     // fw[0..L], fw[L] = 0
  std::vector<size_type> ft;  // ft[0..L], ft[L] = 0: overhead of F_none(k) and F_ck(k)
  std::vector<size_type> fa;  // fa[0..L], fa[L] = 0: overhead of F_all(k)
  std::vector<double> bw;     // bw[0..L], bw[L] = loss time
  std::vector<size_type> bt;  // bt[0..L], bt[L] = loss overhead
  // The times fw and bw are whole multiples of a power of two q such that every sum the DPs form
  // stays below 2^53 q (`quantize_times`): double additions of them are then exact, so every
  // order of summation gives the same bits. False only for chains whose times come within a
  // factor of about 8 (L + 1) of the largest double: those times are kept as given.
  bool exact_sums = false;
  double time_quantum = 0;  // q where exact_sums, else 0
};

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
constexpr void quantize_times(model& m) noexcept {
  const auto repeats = static_cast<double>(m.L + 1);
  double v = 0;  // finite: validation checks this very sum
  for (std::size_t k = 0; k < m.fw.size(); ++k) v += repeats * m.fw[k] + m.bw[k];
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
  for (double& t : m.bw) t = round_to_q(t);
  m.exact_sums = true;
  m.time_quantum = q;
}

// ceil(s / unit) without overflow, for s >= 0 and unit >= 1.
constexpr size_type round_up(size_type s, size_type unit) noexcept {
  return s / unit + (s % unit != 0 ? 1 : 0);
}

// The model of a validated chain, every size rounded up to whole `unit`s (1: sizes as given).
constexpr model make_model(const chain& c, size_type unit) {
  model m;
  m.L = static_cast<std::int32_t>(c.length());
  const auto n = c.length();
  m.x.assign(n + 2, 0);
  m.xb.assign(n + 2, 0);
  m.fw.assign(n + 1, 0);
  m.ft.assign(n + 1, 0);
  m.fa.assign(n + 1, 0);
  m.bw.assign(n + 1, 0);
  m.bt.assign(n + 1, 0);
  m.x[0] = round_up(c.input_size, unit);
  for (std::size_t k = 0; k < n; ++k) {
    const stage& s = c.stages[k];
    m.x[k + 1] = round_up(s.output_size, unit);
    m.xb[k + 1] = round_up(s.tape_size, unit);
    m.fw[k] = s.forward_time;
    m.ft[k] = round_up(s.forward_overhead, unit);
    m.fa[k] = round_up(s.recording_overhead.value_or(s.forward_overhead), unit);
    m.bw[k] = s.backward_time;
    m.bt[k] = round_up(s.backward_overhead, unit);
  }
  m.bw[n] = c.loss_time;
  m.bt[n] = round_up(c.loss_overhead, unit);
  quantize_times(m);
  return m;
}

// The chain whose sizes are those of `m` (for replaying in units).
constexpr chain to_chain(const model& m) {
  chain c;
  const auto n = static_cast<std::size_t>(m.L);
  c.stages.resize(n);
  c.input_size = m.x[0];
  for (std::size_t k = 0; k < n; ++k) {
    c.stages[k] = {m.fw[k], m.bw[k], m.x[k + 1], m.xb[k + 1], m.ft[k], m.bt[k], {}};
    if (m.fa[k] != m.ft[k]) c.stages[k].recording_overhead = m.fa[k];
  }
  c.loss_time = m.bw[n];
  c.loss_overhead = m.bt[n];
  return c;
}

}  // namespace remat::detail

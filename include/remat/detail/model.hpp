// MODEL.md's arrays (x, xb, fw, ft, bw, bt), with sizes rounded up to a memory unit.
#pragma once

#include <remat/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail {

struct model {
  std::int32_t L = 0;
  std::vector<size_type> x;   // x[0..L+1], x[L+1] = 0
  std::vector<size_type> xb;  // xb[0..L+1], xb[0] and xb[L+1] = 0
  std::vector<double> fw;     // fw[0..L], fw[L] = 0
  std::vector<size_type> ft;  // ft[0..L], ft[L] = 0
  std::vector<double> bw;     // bw[0..L], bw[L] = loss time
  std::vector<size_type> bt;  // bt[0..L], bt[L] = loss overhead
};

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
  m.bw.assign(n + 1, 0);
  m.bt.assign(n + 1, 0);
  m.x[0] = round_up(c.input_size, unit);
  for (std::size_t k = 0; k < n; ++k) {
    const stage& s = c.stages[k];
    m.x[k + 1] = round_up(s.output_size, unit);
    m.xb[k + 1] = round_up(s.tape_size, unit);
    m.fw[k] = s.forward_time;
    m.ft[k] = round_up(s.forward_overhead, unit);
    m.bw[k] = s.backward_time;
    m.bt[k] = round_up(s.backward_overhead, unit);
  }
  m.bw[n] = c.loss_time;
  m.bt[n] = round_up(c.loss_overhead, unit);
  return m;
}

// The chain whose sizes are those of `m` (for replaying in units).
constexpr chain to_chain(const model& m) {
  chain c;
  const auto n = static_cast<std::size_t>(m.L);
  c.stages.resize(n);
  c.input_size = m.x[0];
  for (std::size_t k = 0; k < n; ++k)
    c.stages[k] = {m.fw[k], m.bw[k], m.x[k + 1], m.xb[k + 1], m.ft[k], m.bt[k]};
  c.loss_time = m.bw[n];
  c.loss_overhead = m.bt[n];
  return c;
}

}  // namespace remat::detail

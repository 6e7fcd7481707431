// The lower bounds of the search (engines/search.hpp): the dense DP on the model with every size
// rounded down to whole units, whose values never exceed OPT on the chain's own sizes, and the
// choice of that unit.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/tuning.hpp>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace remat::detail {

// `md` with every size rounded down to whole `unit`s (the times unchanged).
inline model floor_model(const model& md, size_type unit) {
  model f = md;
  for_each_size(f, [unit](size_type& s) { s /= unit; });
  for (tape_option& o : f.listed) {
    o.xb /= unit;
    o.fa /= unit;
    o.bt /= unit;
  }
  return f;
}

// The lower bounds of a search at memory up to `m`: the dense DP on `floor_model(md, unit)`.
struct lower_bound_table {
  size_type unit = 1;
  dense_table dense;

  // LB(c, m') for m' <= the m it was made for.
  double at(std::size_t c, size_type m) const noexcept { return dense.get(c, m / unit); }
};

// The unit (`lower_bound_unit`: slots / 4 to 4 slots memories below `m`), and the dense DP's table
// and time estimate there (the table is built by `make_lower_bounds`).
struct lower_bound_plan {
  size_type unit = 1;
  model floor;
  interval_bounds bounds;
  dense_layout layout;
  size_type M = 0;
  double bytes = 0;
  double seconds = 0;
};

// The unit of the lower bounds. Rounding every size down loses its remainder, and a sum of sizes
// loses the sum of theirs: the bounds are only as tight as the remainders are small. Tensor sizes
// share large factors (powers of two times channels and batch), and a unit that divides the
// common sizes keeps the bounds exact on them (on a ResNet whose outputs are all one power of
// two, m / 512 can round each down by a third where that power of two rounds none, and the
// search does far less work). Candidates: each of the heaviest sizes
// (count x size) halved while even, from slots / 4 to 4 slots memories (the DP's time grows with
// them). The largest whose remainders, one per occurrence, sum to at most 2% of m, if it leaves at
// most 2 slots memories or the unit near m / slots loses more than 20% of m; else (many distinct
// sizes, as DenseNet's concatenations) the one that loses least from half to twice m / slots,
// m / slots included (ties to the larger unit).
inline size_type lower_bound_unit(const model& md, size_type m, size_type slots) {
  const size_type n = std::max<size_type>(1, slots);
  const size_type target = std::max<size_type>(1, m / n);
  // The distinct sizes and how often each occurs.
  std::vector<size_type> all;
  for_each_size(md, [&all](size_type s) {
    if (s > 0) all.push_back(s);
  });
  std::sort(all.begin(), all.end());
  struct counted {
    size_type size;
    double count;
  };
  std::vector<counted> sizes;
  for (const size_type s : all) {
    if (sizes.empty() || sizes.back().size != s)
      sizes.push_back({s, 1});
    else
      sizes.back().count += 1;
  }
  auto loss = [&sizes](size_type u) {
    double sum = 0;
    for (const counted& s : sizes) sum += s.count * static_cast<double>(s.size % u);
    return sum;
  };
  constexpr std::size_t heaviest = 64;
  std::vector<counted> by_weight = sizes;
  if (by_weight.size() > heaviest) {
    std::nth_element(by_weight.begin(), by_weight.begin() + heaviest, by_weight.end(),
                     [](const counted& a, const counted& b) {
                       return a.count * static_cast<double>(a.size) >
                              b.count * static_cast<double>(b.size);
                     });
    by_weight.resize(heaviest);
  }
  const size_type coarsest = target > max_size / 4 ? max_size : 4 * target;
  const size_type finest = std::max<size_type>(1, target / 4);
  const size_type near_lo = std::max<size_type>(1, target / 2);
  const size_type near_hi = std::min(coarsest, target > max_size / 2 ? max_size : 2 * target);
  const double small_loss = 0.02 * static_cast<double>(m);
  const double large_loss = 0.2 * static_cast<double>(m);
  size_type aligned = 0;    // the largest candidate that loses little
  size_type near = target;  // the one that loses least near m / slots
  double near_loss = loss(target);
  for (const counted& s : by_weight)
    for (size_type u = s.size; u >= finest; u /= 2) {
      if (u <= coarsest && (u > aligned || (u >= near_lo && u <= near_hi))) {
        const double l = loss(u);
        if (l <= small_loss) aligned = std::max(aligned, u);
        if (u >= near_lo && u <= near_hi && (l < near_loss || (l == near_loss && u > near))) {
          near = u;
          near_loss = l;
        }
      }
      if (u % 2 != 0) break;
    }
  // Finer than 2 slots (the DP's time up to twice that at `slots`) only where the unit near
  // m / slots loses much (the aligned unit of a deep ResNet at a large budget); where the aligned
  // units are far finer and the near one loses little (DenseNet), the near one.
  if (aligned >= near_lo || (aligned > 0 && near_loss > large_loss)) return aligned;
  return near;
}

// What rounding every size of `md` down to whole units loses: the remainders, one per occurrence.
inline double rounding_loss(const model& md, size_type unit) {
  double sum = 0;
  for_each_size(md, [&sum, unit](size_type s) { sum += static_cast<double>(s % unit); });
  return sum;
}

// The lower bounds' plan on a given unit, and on `lower_bound_unit`'s.
inline lower_bound_plan plan_lower_bounds_on(const model& md, size_type m, size_type unit,
                                             dp_branches branches, unsigned threads) {
  lower_bound_plan p;
  p.unit = unit;
  p.floor = floor_model(md, p.unit);
  p.M = m / p.unit;
  p.bounds = make_interval_bounds(p.floor, persistent_need(p.floor, branches), branches);
  p.layout = make_dense_layout(p.bounds, md.L, p.M);
  p.bytes = dense_table_bytes(p.layout, md.L, p.M, threads);
  p.seconds = main_dp_seconds(p.bounds, md.L, p.M, branches, threads);
  return p;
}

inline lower_bound_plan plan_lower_bounds(const model& md, size_type m, size_type slots,
                                          dp_branches branches, unsigned threads) {
  return plan_lower_bounds_on(md, m, lower_bound_unit(md, m, slots), branches, threads);
}

inline lower_bound_table make_lower_bounds(lower_bound_plan p, dp_branches branches,
                                           unsigned threads) {
  lower_bound_table t;
  t.unit = p.unit;
  t.dense = dense_dp(p.floor, std::move(p.bounds), std::move(p.layout), p.M, branches, threads);
  return t;
}

}  // namespace remat::detail

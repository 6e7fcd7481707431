// Offline placement of buffers with known lifetimes in one arena: greedy best fit.
//
// Buffers are taken one at a time in a given order; each goes into the smallest gap, among the
// buffers already placed whose lifetimes intersect its own, that can hold it, or on top of them
// when no gap can. This is the greedy-by-size planner of TensorFlow Lite (Pisarchyk & Lee 2020)
// when the order is by decreasing size, and XLA's global decreasing-size best fit with its other
// orderings; which order packs best depends on the schedule, so the caller tries several.
#pragma once

#include <remat/concepts.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

namespace remat::detail {

// A buffer to place: live from op `first` to op `last`, both included; `size` already aligned.
struct lifetime {
  std::size_t first = 0;
  std::size_t last = 0;
  size_type size = 0;
};

constexpr bool lifetimes_intersect(const lifetime& a, const lifetime& b) noexcept {
  return a.first <= b.last && b.first <= a.last;
}

// The orders in which `best_fit` may take the buffers. Ties go to the earlier buffer, so every
// order is deterministic.
enum class fit_order : std::uint8_t {
  size,      // largest first, then longest lived
  duration,  // longest lived first, then largest
  area,      // largest size x duration first
  start,     // earliest created first, then largest: what an online allocator would see
};

inline constexpr fit_order all_fit_orders[] = {fit_order::size, fit_order::duration,
                                               fit_order::area, fit_order::start};

constexpr std::string_view name(fit_order o) noexcept {
  switch (o) {
    case fit_order::size: return "best-fit by size";
    case fit_order::duration: return "best-fit by duration";
    case fit_order::area: return "best-fit by size x duration";
    case fit_order::start: return "best-fit by start";
  }
  return "?";
}

struct placement {
  std::vector<size_type> offsets;  // one per buffer, in the caller's order
  size_type arena = 0;             // the highest end of any buffer
};

constexpr std::vector<std::size_t> fit_sequence(std::span<const lifetime> buffers, fit_order o) {
  // Filled by push_back: clang 14 cannot value-initialize a vector in a constant expression.
  std::vector<std::size_t> order;
  order.reserve(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) order.push_back(i);
  auto duration = [&](std::size_t i) { return buffers[i].last - buffers[i].first + 1; };
  // size x duration in double: a product of two 64-bit figures may not fit in 64 bits.
  auto area = [&](std::size_t i) {
    return static_cast<double>(buffers[i].size) * static_cast<double>(duration(i));
  };
  auto before = [&](std::size_t i, std::size_t j) {
    const lifetime& a = buffers[i];
    const lifetime& b = buffers[j];
    switch (o) {
      case fit_order::size:
        if (a.size != b.size) return a.size > b.size;
        if (duration(i) != duration(j)) return duration(i) > duration(j);
        break;
      case fit_order::duration:
        if (duration(i) != duration(j)) return duration(i) > duration(j);
        if (a.size != b.size) return a.size > b.size;
        break;
      case fit_order::area:
        if (area(i) != area(j)) return area(i) > area(j);
        if (a.size != b.size) return a.size > b.size;
        break;
      case fit_order::start:
        if (a.first != b.first) return a.first < b.first;
        if (a.size != b.size) return a.size > b.size;
        break;
    }
    return i < j;
  };
  std::sort(order.begin(), order.end(), before);
  return order;
}

// Places every buffer; zero-sized ones take no room and are left at offset 0. O(n^2).
constexpr placement best_fit(std::span<const lifetime> buffers, fit_order o) {
  placement out;
  out.offsets.assign(buffers.size(), 0);
  std::vector<std::size_t> by_offset;  // placed buffers, sorted by offset
  by_offset.reserve(buffers.size());
  for (const std::size_t i : fit_sequence(buffers, o)) {
    const lifetime& b = buffers[i];
    if (b.size == 0) continue;
    // Walk the placed buffers that are live at the same time, lowest first: the space between
    // the highest end seen so far and the next one's start is free for all of b's lifetime.
    size_type end_so_far = 0;
    size_type best = -1;
    size_type best_gap = std::numeric_limits<size_type>::max();
    for (const std::size_t p : by_offset) {
      if (!lifetimes_intersect(buffers[p], b)) continue;
      const size_type gap = out.offsets[p] - end_so_far;
      if (gap >= b.size && gap < best_gap) {
        best = end_so_far;
        best_gap = gap;
      }
      end_so_far = std::max(end_so_far, out.offsets[p] + buffers[p].size);
    }
    if (best < 0) best = end_so_far;
    out.offsets[i] = best;
    out.arena = std::max(out.arena, best + b.size);
    const auto at =
        std::upper_bound(by_offset.begin(), by_offset.end(), best,
                         [&](size_type offset, std::size_t p) { return offset < out.offsets[p]; });
    by_offset.insert(at, i);
  }
  return out;
}

}  // namespace remat::detail

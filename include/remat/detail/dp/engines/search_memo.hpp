// The branch and bound search's memo (engines/search.hpp): every cell searched, keyed by interval
// and memory, with its exact value and choice or the best lower bound found, kept across the
// rounds of iterative deepening.
#pragma once

#include <remat/chain.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail::search {

// A searched cell: its exact value and choice, or a lower bound of its value (24 bytes: the
// table is read once per cell visited, mostly missing the cache).
struct entry {
  size_type m = -1;
  double value = 0;
  std::uint32_t c = 0;
  std::int16_t choice = -1;  // at most tuning.search_max_stages
  bool exact = false;
  bool used = false;
};
static_assert(sizeof(entry) == 24);

// Open addressing on (interval, memory), linear probing, kept at most half full.
class memo {
 public:
  memo() { slots_.resize(1024); }

  entry* find(std::size_t c, size_type m) noexcept {
    for (std::size_t k = hash(c, m) & mask();; k = (k + 1) & mask()) {
      entry& e = slots_[k];
      if (!e.used) return nullptr;
      if (e.c == c && e.m == m) return &e;
    }
  }

  entry& insert(std::size_t c, size_type m) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    entry& e = place(c, m);
    if (!e.used) {
      e.used = true;
      e.c = static_cast<std::uint32_t>(c);
      e.m = m;
      ++size_;
    }
    return e;
  }

  std::size_t size() const noexcept { return size_; }

 private:
  std::vector<entry> slots_;
  std::size_t size_ = 0;

  std::size_t mask() const noexcept { return slots_.size() - 1; }

  static std::size_t hash(std::size_t c, size_type m) noexcept {
    std::uint64_t h = static_cast<std::uint64_t>(m) * 0x9E3779B97F4A7C15ULL ^
                      static_cast<std::uint64_t>(c) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    return static_cast<std::size_t>(h);
  }

  entry& place(std::size_t c, size_type m) noexcept {
    for (std::size_t k = hash(c, m) & mask();; k = (k + 1) & mask()) {
      entry& e = slots_[k];
      if (!e.used || (e.c == c && e.m == m)) return e;
    }
  }

  void grow() {
    std::vector<entry> old(slots_.size() * 2);
    old.swap(slots_);
    for (const entry& e : old)
      if (e.used) place(e.c, e.m) = e;
  }
};

}  // namespace remat::detail::search

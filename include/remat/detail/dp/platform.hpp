// What the DP engines ask of the machine: its memory (the default table limit), an allocator for
// their large arrays, and the number of threads to run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace remat::detail {

// The machine's physical memory in bytes, 0 where it cannot be read.
inline std::size_t physical_memory_bytes() noexcept {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0)
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
#endif
  return 0;
}

// The table limit when `solve_options::max_table_bytes` is unset: half the physical memory, which
// leaves room for the rest of the process and the system; 4 GiB where it cannot be read.
inline std::size_t default_table_limit() noexcept {
  const std::size_t physical = physical_memory_bytes();
  return physical == 0 ? std::size_t{4} << 30 : physical / 2;
}

// The allocator of the DP's large arrays. Their elements are left uninitialized (every one is
// written before it is read: a zero fill would be a pass over the whole table for nothing), and
// on Linux, blocks of 32 MiB to 1 GiB are aligned to 2 MiB with transparent huge pages requested
// (a hint, ignored where unavailable): the DP reads them at scattered places, where 4 KiB pages
// cost a TLB miss at most reads. Above 1 GiB the kernel's compaction at fault time costs more
// than the misses it saves (bench_engines, `dense/1000`).
template <class T>
struct table_allocator {
  using value_type = T;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::size_t huge_from = std::size_t{32} << 20;
  static constexpr std::size_t huge_to = std::size_t{1} << 30;

  static bool huge(std::size_t bytes) noexcept {
#if defined(__linux__)
    return bytes >= huge_from && bytes <= huge_to;
#else
    (void)bytes;
    return false;
#endif
  }

  table_allocator() = default;
  template <class U>
  explicit table_allocator(const table_allocator<U>&) noexcept {}

  static std::size_t alignment(std::size_t bytes) noexcept {
    return huge(bytes) ? huge_page : std::max(alignof(T), alignof(std::max_align_t));
  }
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    void* p = ::operator new (bytes, std::align_val_t{alignment(bytes)});
#if defined(__linux__)
    if (huge(bytes)) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete (p, std::align_val_t{alignment(n * sizeof(T))});
  }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const table_allocator&, const table_allocator&) noexcept {
    return true;
  }
};

using table_vector = std::vector<double, table_allocator<double>>;

// The number of threads `threads` asks for: 0 is the hardware's concurrency.
inline unsigned dp_threads(unsigned threads) noexcept {
  if (threads != 0) return threads;
  return std::max(1U, std::thread::hardware_concurrency());
}

}  // namespace remat::detail

// Counts the heap allocations of the program that includes this header, to prove that a run
// allocates nothing: it replaces the global operator new and delete, so include it in one
// translation unit of a program of its own (the executors' tests).
//
//   CHECK(remat::testing::allocations_during([&] { executor.run(net); }) == 0);
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace remat::testing {

inline bool counting_allocations = false;
inline long allocations_counted = 0;

// The allocations `run()` makes (by operator new, any form).
template <class Run>
long allocations_during(Run&& run) {
  allocations_counted = 0;
  counting_allocations = true;
  static_cast<Run&&>(run)();
  counting_allocations = false;
  return allocations_counted;
}

inline void* counted_allocation(std::size_t n, std::size_t alignment) {
  if (counting_allocations) ++allocations_counted;
  n = n == 0 ? 1 : n;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(alignment, (n + alignment - 1) / alignment * alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace remat::testing

// The replacements may not be inline. Array forms too: a sanitizer's runtime does not forward
// them to the scalar ones.
void* operator new(std::size_t n) {
  return remat::testing::counted_allocation(n, 0);
}
void* operator new[](std::size_t n) {
  return remat::testing::counted_allocation(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return remat::testing::counted_allocation(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return remat::testing::counted_allocation(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

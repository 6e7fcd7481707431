// How many random instances a property test draws. A plain build draws them all; a build under
// AddressSanitizer or ThreadSanitizer runs five to ten times slower and is there to find memory
// errors, undefined behaviour and races, which the first quarter of the instances reaches as well
// (every test's instances are drawn from a fixed seed, so that quarter is the same each run).
#pragma once

#include <algorithm>

namespace remat::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

// `n` in a plain build, a quarter of it (at least 1) in a sanitized one.
constexpr int trials(int n) { return sanitized_build ? std::max(1, n / 4) : n; }

}  // namespace remat::testing

// remat's version. CMake reads it from here (CMakeLists.txt), so the package version that
// `find_package(remat 0.1)` checks and these macros cannot disagree.
#pragma once

#define REMAT_VERSION_MAJOR 0
#define REMAT_VERSION_MINOR 1
#define REMAT_VERSION_PATCH 0

/// One number that grows with every release, for `#if REMAT_VERSION >= 100`: major * 10000 +
/// minor * 100 + patch.
#define REMAT_VERSION \
  (REMAT_VERSION_MAJOR * 10000 + REMAT_VERSION_MINOR * 100 + REMAT_VERSION_PATCH)

#define REMAT_DETAIL_STRINGIFY_(x) #x
#define REMAT_DETAIL_STRINGIFY(x) REMAT_DETAIL_STRINGIFY_(x)
/// "major.minor.patch".
#define REMAT_VERSION_STRING                  \
  REMAT_DETAIL_STRINGIFY(REMAT_VERSION_MAJOR) \
  "." REMAT_DETAIL_STRINGIFY(REMAT_VERSION_MINOR) "." REMAT_DETAIL_STRINGIFY(REMAT_VERSION_PATCH)

namespace remat {

/// The version of the headers in use, for run-time reports.
struct version_info {
  int major;
  int minor;
  int patch;
};
inline constexpr version_info version{REMAT_VERSION_MAJOR, REMAT_VERSION_MINOR,
                                      REMAT_VERSION_PATCH};

}  // namespace remat

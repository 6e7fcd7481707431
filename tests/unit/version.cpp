// The version macros of remat/version.hpp, and that CMake took its project version from them.
#include <remat/version.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>

namespace unit_version_test {

TEST_CASE("the version macros agree with each other and with CMake's project version") {
  static_assert(REMAT_VERSION ==
                REMAT_VERSION_MAJOR * 10000 + REMAT_VERSION_MINOR * 100 + REMAT_VERSION_PATCH);
  static_assert(REMAT_VERSION_MINOR < 100 && REMAT_VERSION_PATCH < 100,
                "REMAT_VERSION packs minor and patch into two digits each");
  const std::string expected = std::to_string(REMAT_VERSION_MAJOR) + "." +
                               std::to_string(REMAT_VERSION_MINOR) + "." +
                               std::to_string(REMAT_VERSION_PATCH);
  CHECK(std::string_view(REMAT_VERSION_STRING) == expected);
  // CMake's project version (what find_package(remat X.Y) compares) is the header's.
  CHECK(std::string_view(REMAT_PROJECT_VERSION) == expected);
  CHECK(remat::version.major == REMAT_VERSION_MAJOR);
  CHECK(remat::version.minor == REMAT_VERSION_MINOR);
  CHECK(remat::version.patch == REMAT_VERSION_PATCH);
}

}  // namespace unit_version_test

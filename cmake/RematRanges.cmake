# remat::ranges: include/remat/ranges.hpp (chains from columns, views of blocks and expanded
# schedules) over range-v3 (Debian: librange-v3-dev). Built when range-v3's CMake package is
# found; otherwise skipped with one line. The rest of remat does not need range-v3.
find_package(range-v3 QUIET)
if(NOT range-v3_FOUND)
  message(STATUS "remat::ranges: range-v3 not found (find_package(range-v3)), skipping "
                 "remat/ranges.hpp, its tests and the coarsening benchmark")
else()
  add_library(remat_ranges INTERFACE)
  add_library(remat::ranges ALIAS remat_ranges)
  set_target_properties(remat_ranges PROPERTIES EXPORT_NAME ranges)
  target_link_libraries(remat_ranges INTERFACE remat range-v3::range-v3)
  install(TARGETS remat_ranges EXPORT remat-ranges-targets)
  install(EXPORT remat-ranges-targets NAMESPACE remat::
          DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/remat)
endif()

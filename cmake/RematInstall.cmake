# install + export + package config, so that `find_package(remat CONFIG)` gives remat::remat.
include(CMakePackageConfigHelpers)

set(REMAT_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/remat)

install(TARGETS remat EXPORT remat-targets)
install(DIRECTORY include/remat DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT remat-targets NAMESPACE remat:: DESTINATION ${REMAT_CMAKE_DIR})

configure_package_config_file(cmake/remat-config.cmake.in
                              ${PROJECT_BINARY_DIR}/remat-config.cmake
                              INSTALL_DESTINATION ${REMAT_CMAKE_DIR})
# Header-only: the package fits any architecture.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/remat-config-version.cmake
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/remat-config.cmake
              ${PROJECT_BINARY_DIR}/remat-config-version.cmake
        DESTINATION ${REMAT_CMAKE_DIR})
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

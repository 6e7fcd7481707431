# Configures remat with tests, tools, examples and benchmarks off, as a packager installing the
# headers would, and checks that nothing else was configured: no CUDA toolkit or nvcc probed,
# no program to build.   cmake -DSOURCE=<remat> -DBINARY=<empty dir> -P configure_only_asked.cmake
file(REMOVE_RECURSE ${BINARY})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G Ninja
                        -DREMAT_BUILD_TESTS=OFF -DREMAT_BUILD_TOOLS=OFF
                        -DREMAT_BUILD_EXAMPLES=OFF -DREMAT_BUILD_BENCHMARKS=OFF
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configure failed:\n${out}")
endif()
file(STRINGS ${BINARY}/CMakeCache.txt cuda_entries REGEX "^(CUDAToolkit_[A-Za-z_]*|CMAKE_CUDA_COMPILER[A-Za-z_]*):")
if(cuda_entries)
  message(FATAL_ERROR "a configure without tests or examples probed CUDA: ${cuda_entries}")
endif()
file(STRINGS ${BINARY}/build.ninja programs REGEX "^build [^:]*: CXX_EXECUTABLE_LINKER")
if(programs)
  message(FATAL_ERROR "a configure without tests, tools, examples or benchmarks builds: ${programs}")
endif()

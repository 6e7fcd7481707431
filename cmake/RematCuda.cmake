# remat::cuda: the CUDA executor (include/remat/cuda/). It needs only the CUDA runtime's host
# API, so any C++ compiler builds it against CUDA::cudart; nvcc is needed only for the kernels of
# remat's own CUDA tests and examples, compiled when CMake finds it (check_language).
# The toolkit is probed for the default only where something CUDA would be built: remat's own
# tests or examples at the top level. Otherwise nothing CUDA is configured unless asked for
# (-DREMAT_CUDA=ON, e.g. by a packager installing remat::cuda).
set(remat_cuda_default OFF)
if(NOT DEFINED REMAT_CUDA AND PROJECT_IS_TOP_LEVEL AND (REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES))
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(remat_cuda_default ON)
  endif()
endif()
option(REMAT_CUDA "Build remat::cuda, the CUDA executor (needs the CUDA toolkit)"
       ${remat_cuda_default})

if(REMAT_CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(remat_cuda INTERFACE)
  add_library(remat::cuda ALIAS remat_cuda)
  set_target_properties(remat_cuda PROPERTIES EXPORT_NAME cuda)
  target_link_libraries(remat_cuda INTERFACE remat CUDA::cudart)

  include(CheckLanguage)
  if(REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES)
    check_language(CUDA)  # nvcc, for the kernels of remat's own tests and examples
  endif()
  if(CMAKE_CUDA_COMPILER AND PROJECT_IS_TOP_LEVEL AND (REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES))
    # cmake 3.25 with nvcc 13 ignores CUDA_STANDARD 20 and rejects cuda_std_20: targets pass
    # -std=c++20 themselves. 90 covers H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    # One runtime in every program: the shared one that CUDA::cudart names, not nvcc's static.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    set(REMAT_CUDA_KERNELS ON)
  endif()
endif()

# Kernels of remat's own tests and examples: `remat_add_cuda_kernels(target sources...)` makes a
# static library of them, in C++20, warnings as errors where REMAT_WARNINGS_AS_ERRORS asks. CUDA_STANDARD 20 gives no flag with cmake
# 3.25, but without it cmake appends the C++ compiler's default standard (-std=c++14 for
# clang 14), which would override -std=c++20.
function(remat_add_cuda_kernels target)
  add_library(${target} STATIC ${ARGN})
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>
                                           $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${REMAT_WARNINGS_AS_ERRORS}>>:-Werror=all-warnings>)
  target_link_libraries(${target} PUBLIC CUDA::cudart)
endfunction()

# Installed beside remat::remat; remat-config.cmake loads it (and finds CUDAToolkit) if present.
if(TARGET remat_cuda)
  install(TARGETS remat_cuda EXPORT remat-cuda-targets)
  install(EXPORT remat-cuda-targets NAMESPACE remat::
          DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/remat)
endif()

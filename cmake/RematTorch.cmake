# remat::torch: profiling chains from libtorch models and running schedules through autograd
# (include/remat/torch/). Built when libtorch's CMake package is found (Debian: libtorch-dev);
# otherwise skipped with one line. Torch's headers are included as SYSTEM (imported targets'
# directories are), so remat's warning flags stay on for remat's own code.
option(REMAT_TORCH "Build remat::torch, the libtorch adapter, when libtorch is found" ON)

if(REMAT_TORCH)
  find_package(Torch QUIET)
  if(NOT Torch_FOUND AND NOT TORCH_FOUND)
    message(STATUS "remat::torch: libtorch not found (find_package(Torch)), skipping the libtorch "
                   "adapter, its tests and examples")
  else()
    # libtorch's headers must compile in C++20 with this compiler: libtorch 1.13's do not with
    # clang 14 (c10::IValue is used incomplete in a std::vector). Checked once, then cached.
    include(CheckCXXSourceCompiles)
    include(CMakePushCheckState)
    cmake_push_check_state(RESET)
    set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS})
    set(CMAKE_REQUIRED_FLAGS "-std=c++20 ${TORCH_CXX_FLAGS}")
    set(CMAKE_REQUIRED_QUIET ON)
    set(remat_saved_try_compile_type ${CMAKE_TRY_COMPILE_TARGET_TYPE})
    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)  # compile only: no libtorch to link
    check_cxx_source_compiles("#include <ATen/ATen.h>\n#include <torch/csrc/autograd/autograd.h>\nint main() {}"
                              REMAT_TORCH_HEADERS_COMPILE)
    cmake_pop_check_state()
    set(CMAKE_TRY_COMPILE_TARGET_TYPE ${remat_saved_try_compile_type})
    if(NOT REMAT_TORCH_HEADERS_COMPILE)
      message(STATUS "remat::torch: libtorch's headers do not compile in C++20 with "
                     "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, skipping the libtorch "
                     "adapter, its tests and examples")
    else()
      add_library(remat_torch INTERFACE)
      add_library(remat::torch ALIAS remat_torch)
      set_target_properties(remat_torch PROPERTIES EXPORT_NAME torch)
      target_link_libraries(remat_torch INTERFACE remat torch)
      # CUDA statistics only where libtorch has CUDA.
      if(TARGET torch_cuda)
        target_compile_definitions(remat_torch INTERFACE REMAT_TORCH_CUDA=1)
      endif()
      install(TARGETS remat_torch EXPORT remat-torch-targets)
      install(EXPORT remat-torch-targets NAMESPACE remat::
              DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/remat)
    endif()
  endif()
endif()

# A Python with torch and torchvision, for the tests and the example that load TorchScript
# pieces saved from Python (examples/libtorch/export_pieces.py). Debian's /usr/bin/python3 is
# tried first: python3-torch and python3-torchvision install there, and a python3 earlier on
# PATH (pyenv, a virtual environment) may lack them. -DREMAT_TORCH_PYTHON=... picks another.
if(TARGET remat_torch AND (REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES)
   AND NOT DEFINED REMAT_TORCH_PYTHON)
  set(remat_python_found "")
  foreach(candidate IN ITEMS /usr/bin/python3 python3)
    find_program(remat_python_candidate NAMES ${candidate} NO_CACHE)
    if(remat_python_candidate)
      execute_process(COMMAND ${remat_python_candidate} -c "import torch, torchvision"
                      RESULT_VARIABLE remat_python_result OUTPUT_QUIET ERROR_QUIET)
      if(remat_python_result EQUAL 0)
        set(remat_python_found ${remat_python_candidate})
        break()
      endif()
    endif()
    unset(remat_python_candidate)
  endforeach()
  if(remat_python_found)
    message(STATUS "remat::torch: TorchScript pieces made with ${remat_python_found}")
  else()
    message(STATUS "remat::torch: no Python with torch and torchvision (Debian: python3-torch, "
                   "python3-torchvision); the TorchScript tests and example are skipped")
  endif()
  set(REMAT_TORCH_PYTHON "${remat_python_found}" CACHE FILEPATH
      "Python with torch and torchvision, for the TorchScript tests and example")
endif()

# remat::torch: profiling chains from libtorch models and running schedules through autograd
# (include/remat/torch/). Built when libtorch's CMake package is found and usable; otherwise
# skipped with one line saying why. Torch's headers are included as SYSTEM (imported targets'
# directories are), so remat's warning flags stay on for remat's own code.
#
# Which libtorch: the one of the Python the user has. REMAT_TORCH_PYTHON names it; otherwise the
# active `python3` (first on PATH: a virtual environment, pyenv), else Debian's /usr/bin/python3,
# whichever first imports torch. Its `torch.utils.cmake_prefix_path` is where find_package(Torch)
# looks first (a pip wheel ships its CMake package there; Debian's python3-torch does not, and
# libtorch-dev's is found in the system's paths). -DTorch_DIR=... overrides all of this. That
# Python also makes the TorchScript pieces the tests load (with torchvision), so that pieces and
# libtorch are one version. One build tree per torch: switching means a new build directory.
option(REMAT_TORCH "Build remat::torch, the libtorch adapter, when libtorch is found" ON)
set(REMAT_TORCH_PYTHON "" CACHE FILEPATH
    "Python whose torch remat::torch is built against (empty: python3 on PATH, else /usr/bin/python3)")

# Says why remat::torch is not built, in one line.
function(remat_torch_skip)
  string(JOIN "" why ${ARGV})
  message(STATUS "remat::torch: ${why}; skipping the libtorch adapter, its tests and examples "
                 "(-DREMAT_TORCH=OFF silences this)")
endfunction()

# A pip build (scikit-build-core, which sets SKBUILD and Python3_EXECUTABLE to the interpreter
# that runs it: the one of the environment pip installs into) runs CMake inside pip's isolated
# build environment, whose PYTHONPATH names a sitecustomize that hides that environment's
# site-packages, torch among them. remat._torch must be built against the torch the environment
# loads, so there that interpreter, and no other, is asked about torch without the overlay
# (PYTHONPATH and PYTHONNOUSERSITE unset). python/CMakeLists.txt asks it the same way.
set(remat_python_launcher "")
if(SKBUILD)
  set(remat_python_launcher ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE)
endif()

# Sets `out` to the first of `candidates` that imports torch, and `out`_PREFIX to its
# torch.utils.cmake_prefix_path, `out`_VERSION to torch.__version__.
function(remat_find_torch_python out)
  foreach(candidate IN LISTS ARGN)
    find_program(remat_candidate NAMES ${candidate} NO_CACHE)
    if(NOT remat_candidate)
      continue()
    endif()
    execute_process(
      COMMAND ${remat_python_launcher} ${remat_candidate} -c
              "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path)"
      RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(result EQUAL 0)
      string(REPLACE "\n" ";" output "${output}")
      list(GET output 0 version)
      list(GET output 1 prefix)
      set(${out} ${remat_candidate} PARENT_SCOPE)
      set(${out}_VERSION ${version} PARENT_SCOPE)
      set(${out}_PREFIX ${prefix} PARENT_SCOPE)
      return()
    endif()
    unset(remat_candidate)
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# find_package(Torch) in a child CMake first: a CUDA build of libtorch (every Linux wheel) stops
# the configure with FATAL_ERROR when it finds no CUDA toolkit, or one whose nvcc and headers
# disagree, which must be a skip here, not a failed configure. The answer is cached per package
# directory and compiler.
function(remat_probe_torch torch_dir out_ok out_why)
  set(key "${torch_dir}|${Caffe2_DIR}|${CMAKE_CXX_COMPILER}")
  if(DEFINED CACHE{REMAT_TORCH_PROBE_KEY} AND REMAT_TORCH_PROBE_KEY STREQUAL key)
    set(${out_ok} ${REMAT_TORCH_PROBE_OK} PARENT_SCOPE)
    set(${out_why} "${REMAT_TORCH_PROBE_WHY}" PARENT_SCOPE)
    return()
  endif()
  set(dir ${PROJECT_BINARY_DIR}/remat-torch-probe)
  file(REMOVE_RECURSE ${dir})
  file(WRITE ${dir}/src/CMakeLists.txt
       "cmake_minimum_required(VERSION 3.22)\nproject(remat_torch_probe LANGUAGES CXX)\n"
       "find_package(Torch REQUIRED)\n")
  set(args -S ${dir}/src -B ${dir}/build -G ${CMAKE_GENERATOR}
           -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
  if(torch_dir)
    list(APPEND args -DTorch_DIR=${torch_dir})
  endif()
  if(Caffe2_DIR)
    list(APPEND args -DCaffe2_DIR=${Caffe2_DIR})
  endif()
  if(CMAKE_CUDA_COMPILER)
    list(APPEND args -DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER})
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} ${args} RESULT_VARIABLE result
                  OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  set(why "")
  if(result EQUAL 0)
    set(ok ON)
  else()
    set(ok OFF)
    file(WRITE ${dir}/configure.log "${output}${errors}")
    # The first error's message, on one line.
    string(REGEX MATCH "CMake Error[^\n]*\n(([^\n]+\n)+)" _ "${errors}")
    string(REGEX REPLACE "[ \n]+" " " why "${CMAKE_MATCH_1}")
    string(STRIP "${why}" why)
    set(why "${why} (the whole log: ${dir}/configure.log)")
  endif()
  set(REMAT_TORCH_PROBE_KEY "${key}" CACHE INTERNAL "")
  set(REMAT_TORCH_PROBE_OK ${ok} CACHE INTERNAL "")
  set(REMAT_TORCH_PROBE_WHY "${why}" CACHE INTERNAL "")
  set(${out_ok} ${ok} PARENT_SCOPE)
  set(${out_why} "${why}" PARENT_SCOPE)
endfunction()

set(remat_torch_python "")
if(REMAT_TORCH)
  if(REMAT_TORCH_PYTHON)
    remat_find_torch_python(remat_torch_python ${REMAT_TORCH_PYTHON})
    if(NOT remat_torch_python)
      message(FATAL_ERROR "REMAT_TORCH_PYTHON=${REMAT_TORCH_PYTHON} cannot import torch")
    endif()
  else()
    if(SKBUILD)
      set(remat_torch_candidates ${Python3_EXECUTABLE})
    else()
      set(remat_torch_candidates python3 /usr/bin/python3)
    endif()
    remat_find_torch_python(remat_torch_python ${remat_torch_candidates})
    if(remat_torch_python)  # kept: a re-configure (by the build, say) sees the same torch
      set(REMAT_TORCH_PYTHON ${remat_torch_python} CACHE FILEPATH
          "Python whose torch remat::torch is built against" FORCE)
    endif()
  endif()
  if(remat_torch_python AND NOT Torch_DIR AND EXISTS ${remat_torch_python_PREFIX}/Torch/TorchConfig.cmake)
    set(Torch_DIR ${remat_torch_python_PREFIX}/Torch CACHE PATH "libtorch's CMake package" FORCE)
  endif()
  # TorchConfig finds Caffe2 (its targets) with PATHS, which come after the system's
  # directories: beside a Debian libtorch-dev, a wheel's TorchConfig would load Debian's Caffe2.
  if(Torch_DIR AND NOT Caffe2_DIR AND EXISTS ${Torch_DIR}/../Caffe2/Caffe2Config.cmake)
    get_filename_component(remat_caffe2_dir ${Torch_DIR}/../Caffe2 ABSOLUTE)
    set(Caffe2_DIR ${remat_caffe2_dir} CACHE PATH "libtorch's Caffe2 package" FORCE)
  endif()
  if(remat_torch_python)
    message(STATUS "remat::torch: Python ${remat_torch_python} has torch ${remat_torch_python_VERSION}")
  endif()
endif()

# A pip build looks for no libtorch but its Python's (a system libtorch would be another torch).
if(REMAT_TORCH AND SKBUILD AND NOT remat_torch_python)
  remat_torch_skip("${Python3_EXECUTABLE}, the Python this package is built for, cannot import "
                   "torch (install torch into its environment before remat)")
elseif(REMAT_TORCH)
  set(remat_torch_dir "")
  if(Torch_DIR)
    set(remat_torch_dir ${Torch_DIR})
  endif()
  remat_probe_torch("${remat_torch_dir}" remat_torch_usable remat_torch_why)
  if(remat_torch_usable)
    # A CUDA libtorch's package enables CUDA and sets CMAKE_CUDA_ARCHITECTURES to OFF (it wants
    # TORCH_CUDA_ARCH_LIST), CMAKE_CUDA_STANDARD and CMAKE_CUDA_STANDARD_REQUIRED: remat's own
    # CUDA targets keep what they had (cmake/RematCuda.cmake).
    set(remat_cuda_variables CMAKE_CUDA_ARCHITECTURES CMAKE_CUDA_STANDARD
                             CMAKE_CUDA_STANDARD_REQUIRED)
    foreach(variable IN LISTS remat_cuda_variables)
      set(remat_saved_defined_${variable} OFF)
      if(DEFINED ${variable})
        set(remat_saved_defined_${variable} ON)
        set(remat_saved_${variable} "${${variable}}")
      endif()
    endforeach()
    find_package(Torch QUIET)
    foreach(variable IN LISTS remat_cuda_variables)
      if(remat_saved_defined_${variable})
        set(${variable} "${remat_saved_${variable}}")
      else()
        unset(${variable})
      endif()
    endforeach()
  endif()
  if(NOT remat_torch_usable)
    remat_torch_skip("find_package(Torch) fails: ${remat_torch_why}")
  elseif(NOT Torch_FOUND AND NOT TORCH_FOUND)
    remat_torch_skip("libtorch not found (find_package(Torch); Debian: libtorch-dev; a pip "
                     "wheel: activate its environment or set REMAT_TORCH_PYTHON)")
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
      remat_torch_skip("libtorch's headers do not compile in C++20 with ${CMAKE_CXX_COMPILER_ID} "
                       "${CMAKE_CXX_COMPILER_VERSION}")
    else()
      add_library(remat_torch INTERFACE)
      add_library(remat::torch ALIAS remat_torch)
      set_target_properties(remat_torch PROPERTIES EXPORT_NAME torch)
      target_link_libraries(remat_torch INTERFACE remat torch)
      # CUDA statistics and generators only where libtorch has CUDA.
      if(TARGET torch_cuda)
        target_compile_definitions(remat_torch INTERFACE REMAT_TORCH_CUDA=1)
      endif()
      include(${CMAKE_CURRENT_LIST_DIR}/remat-torch-link.cmake)
      if(remat_torch_rpath_link)  # the installed package adds its own (remat-config.cmake)
        target_link_options(remat_torch INTERFACE "$<BUILD_INTERFACE:${remat_torch_rpath_link}>")
      endif()
      if(TARGET torch_cuda)
        message(STATUS "remat::torch: libtorch ${Torch_VERSION} with CUDA (${Torch_DIR})")
      else()
        message(STATUS "remat::torch: libtorch ${Torch_VERSION}, CPU only (${Torch_DIR})")
      endif()
      install(TARGETS remat_torch EXPORT remat-torch-targets)
      install(FILES ${CMAKE_CURRENT_LIST_DIR}/remat-torch-link.cmake
              DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/remat)
      install(EXPORT remat-torch-targets NAMESPACE remat::
              DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/remat)
    endif()
  endif()
endif()

# A Python with torch and torchvision, for the tests and the example that load TorchScript
# pieces saved from Python (examples/libtorch/export_pieces.py): the Python found above, when
# its torch is the libtorch found (the same version) and it has torchvision.
set(REMAT_TORCH_PIECES_PYTHON "")
if(TARGET remat_torch AND (REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES))
  set(remat_pieces_why "")
  if(NOT remat_torch_python)
    set(remat_pieces_why "no Python with torch")
  else()
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" remat_python_torch_mm "${remat_torch_python_VERSION}")
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" remat_cmake_torch_mm "${Torch_VERSION}")
    execute_process(COMMAND ${remat_torch_python} -c "import torchvision"
                    RESULT_VARIABLE remat_no_torchvision OUTPUT_QUIET ERROR_QUIET)
    if(NOT remat_python_torch_mm STREQUAL remat_cmake_torch_mm)
      set(remat_pieces_why "${remat_torch_python}'s torch is ${remat_torch_python_VERSION}, libtorch ${Torch_VERSION}")
    elseif(remat_no_torchvision)
      set(remat_pieces_why "${remat_torch_python} has no torchvision (Debian: python3-torchvision)")
    endif()
  endif()
  if(remat_pieces_why)
    message(STATUS "remat::torch: ${remat_pieces_why}; the TorchScript tests and example are "
                   "skipped")
  else()
    set(REMAT_TORCH_PIECES_PYTHON ${remat_torch_python})
    message(STATUS "remat::torch: TorchScript pieces made with ${remat_torch_python}")
  endif()
endif()

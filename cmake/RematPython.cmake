# `import remat` (python/): the compiled module remat._core (pybind11) with the package around it,
# and remat._torch, the CPU allocation meter for remat.torch, linked against the libtorch that
# Python's torch loads. REMAT_PYTHON is ON (build it, or fail at configure time saying what is
# missing), OFF, or AUTO (build it where pybind11 and Python's headers are found, else one line
# saying why not). AUTO is the default where remat is the top-level project and its tools are
# built, without sanitizers (a sanitized module cannot be loaded by an unsanitized Python).
# Python is the one whose torch remat::torch was found with (cmake/RematTorch.cmake: a virtual
# environment's, Debian's /usr/bin/python3 with python3-torch), else Debian's /usr/bin/python3
# where it exists; -DPython3_EXECUTABLE=... picks another.
set(remat_python_default OFF)
if(PROJECT_IS_TOP_LEVEL AND REMAT_BUILD_TOOLS AND NOT REMAT_SANITIZE AND NOT REMAT_FUZZ)
  set(remat_python_default AUTO)
endif()
set(REMAT_PYTHON ${remat_python_default} CACHE STRING
    "Build the Python package `remat` (ON, OFF, or AUTO: where pybind11 and Python are found)")
set_property(CACHE REMAT_PYTHON PROPERTY STRINGS ON OFF AUTO)
set(REMAT_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "Where `cmake --install` puts the package remat/, relative to the prefix")

# Says why the package is not built: an error where it was asked for (ON), one line otherwise.
function(remat_python_unavailable)
  string(JOIN "" why ${ARGV})
  if(REMAT_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "REMAT_PYTHON=ON: ${why}")
  endif()
  message(STATUS "remat Python package: not built: ${why} (-DREMAT_PYTHON=OFF silences this)")
endfunction()

if(NOT REMAT_PYTHON STREQUAL "OFF" AND NOT REMAT_PYTHON STREQUAL "ON"
   AND NOT REMAT_PYTHON STREQUAL "AUTO")
  message(FATAL_ERROR "REMAT_PYTHON must be ON, OFF or AUTO (got '${REMAT_PYTHON}')")
endif()

set(remat_python_ok OFF)
if(NOT REMAT_PYTHON STREQUAL "OFF" AND REMAT_SANITIZE)
  remat_python_unavailable("a module built with REMAT_SANITIZE=${REMAT_SANITIZE} cannot be "
                           "loaded by Python")
elseif(NOT REMAT_PYTHON STREQUAL "OFF")
  if(NOT TARGET nlohmann_json::nlohmann_json)
    find_package(nlohmann_json 3.10 QUIET)  # chain files; found already with tools or tests
  endif()
  if(NOT TARGET nlohmann_json::nlohmann_json)
    remat_python_unavailable("nlohmann-json (>= 3.10), which reads chain files, not found "
                             "(Debian: nlohmann-json3-dev)")
  else()
    # The Python whose torch remat::torch is built against (REMAT_TORCH_PYTHON, or the first
    # python3 that imports torch: cmake/RematTorch.cmake), so that `import remat.torch` works
    # with that torch, and `import remat` in the user's environment even where the adapter is
    # skipped; without a Python with torch, Debian's.
    if(NOT DEFINED Python3_EXECUTABLE AND remat_torch_python)
      set(Python3_EXECUTABLE ${remat_torch_python})
    elseif(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
      set(Python3_EXECUTABLE /usr/bin/python3)
    endif()
    find_package(Python3 COMPONENTS Interpreter Development.Module)
    if(NOT Python3_Interpreter_FOUND)
      remat_python_unavailable("no Python 3 interpreter found (Debian: python3)")
    elseif(NOT Python3_Development.Module_FOUND)
      remat_python_unavailable("Python's headers for ${Python3_EXECUTABLE} not found (Debian: "
                               "python3-dev)")
    else()
      set(PYBIND11_FINDPYTHON ON)  # pybind11 uses the Python3 found above
      find_package(pybind11 2.6 CONFIG QUIET)
      if(NOT pybind11_FOUND)
        remat_python_unavailable("pybind11's CMake package not found (Debian: pybind11-dev, or "
                                 "-Dpybind11_DIR=...)")
      else()
        set(remat_python_ok ON)
      endif()
    endif()
  endif()
endif()

if(remat_python_ok)
  message(STATUS "remat Python package: for ${Python3_EXECUTABLE} (${Python3_VERSION}), pybind11 "
                 "${pybind11_VERSION}")
  add_subdirectory(python)
endif()

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

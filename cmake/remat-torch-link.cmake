# Included after find_package(Torch), by remat's build (cmake/RematTorch.cmake) and by its
# installed package (remat-config.cmake): a pip wheel's libtorch_cuda.so finds NVIDIA's libraries
# (cuDNN, NCCL, cuBLAS, ...) through its RPATH in site-packages/nvidia/*/lib, and at link time
# the linker must find those same ones, not older copies in a local CUDA toolkit whose directory
# CMake passes first as -rpath (the link then fails on symbols only the newer ones have).
# Sets remat_torch_rpath_link to the link option that says so, or to nothing.
set(remat_torch_rpath_link "")
get_filename_component(remat_torch_nvidia "${TORCH_INSTALL_PREFIX}/../nvidia" ABSOLUTE)
file(GLOB remat_torch_nvidia_libs LIST_DIRECTORIES true "${remat_torch_nvidia}/*/lib")
if(remat_torch_nvidia_libs)
  string(JOIN ":" remat_torch_nvidia_libs ${remat_torch_nvidia_libs})
  set(remat_torch_rpath_link "LINKER:-rpath-link,${remat_torch_nvidia_libs}")
endif()

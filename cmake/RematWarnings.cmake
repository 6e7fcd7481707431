# Warnings are errors in remat's own build (tests, tools, examples, benchmarks), never imposed on
# consumers: they link `remat::remat`, which carries no flags.
add_library(remat_project_options INTERFACE)
target_compile_options(
  remat_project_options
  INTERFACE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Werror)
if(REMAT_SANITIZE)
  target_compile_options(remat_project_options INTERFACE -fsanitize=${REMAT_SANITIZE}
                                                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(remat_project_options INTERFACE -fsanitize=${REMAT_SANITIZE})
endif()

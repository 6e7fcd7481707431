# Warnings for remat's own build (tests, tools, examples, benchmarks), never imposed on consumers:
# they link `remat::remat`, which carries no flags. They become errors only where asked
# (REMAT_WARNINGS_AS_ERRORS: the presets and CI turn it on), so that a plain build with a
# compiler the project did not test never fails on a new warning.
option(REMAT_WARNINGS_AS_ERRORS "Treat warnings in remat's own targets as errors" OFF)
add_library(remat_project_options INTERFACE)
target_compile_options(remat_project_options
                       INTERFACE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow
                                 $<$<BOOL:${REMAT_WARNINGS_AS_ERRORS}>:-Werror>)
if(REMAT_SANITIZE)
  target_compile_options(remat_project_options INTERFACE -fsanitize=${REMAT_SANITIZE}
                                                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(remat_project_options INTERFACE -fsanitize=${REMAT_SANITIZE})
endif()

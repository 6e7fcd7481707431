# A compile-fail test: passes when SOURCE compiles with -DREMAT_COMPILE_FAIL_FIXED (the mistake
# corrected: the test cannot pass for an unrelated reason) and fails without it, with diagnostics
# that match the regular expression on its `// EXPECT: ` line.
#   cmake -DCXX=g++ -DINCLUDE=include -DSOURCE=tests/compile_fail/x.cpp -P check.cmake
file(STRINGS ${SOURCE} expect_line REGEX "^// EXPECT: ")
string(REGEX REPLACE "^// EXPECT: " "" expect "${expect_line}")
if(expect STREQUAL "")
  message(FATAL_ERROR "${SOURCE} has no `// EXPECT: regex` line")
endif()
set(compile ${CXX} -std=c++20 -fsyntax-only -fdiagnostics-color=never -I${INCLUDE} ${SOURCE})
execute_process(COMMAND ${compile} -DREMAT_COMPILE_FAIL_FIXED RESULT_VARIABLE status
                OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the corrected variant does not compile:\n${output}")
endif()
execute_process(COMMAND ${compile} RESULT_VARIABLE status OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiles, but must not")
endif()
if(NOT output MATCHES "${expect}")
  message(FATAL_ERROR "compilation fails, but the diagnostics do not match '${expect}':\n${output}")
endif()
message(STATUS "fails to compile, as it must, with '${expect}' in the diagnostics")

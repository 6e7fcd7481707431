# Runs EXE and fails unless what it prints equals the contents of EXPECTED (the README's block
# under the example):  cmake -DEXE=... -DEXPECTED=... -P run_and_compare.cmake
execute_process(COMMAND ${EXE} OUTPUT_VARIABLE printed RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${EXE} failed with status ${status}")
endif()
file(READ ${EXPECTED} expected)
if(NOT printed STREQUAL expected)
  message(FATAL_ERROR "${EXE} printed\n${printed}\nwhich is not what the README shows under it:\n"
                      "${expected}")
endif()

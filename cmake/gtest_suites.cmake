# CTest tests for a GoogleTest binary, one per test suite (a suite of more
# than SOFTVERBS_GTEST_SHARD tests: several, each a GoogleTest shard),
# instead of gtest_discover_tests' one process per test. 2400 processes
# each setting up a device and its registry took ~200 s of CPU in CI for
# ~40 s of tests; the binaries also run whole under the sanitizers
# (.ci/run), so tests already share a process there. A failure names the
# suite; its output names the test. Listed after each build (the binary's
# --gtest_list_tests), as gtest_discover_tests does.
set(SOFTVERBS_GTEST_SHARD 150 CACHE STRING "at most this many tests of one suite per CTest test")

function(softverbs_gtest_suites target label timeout)
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D BIN=$<TARGET_FILE:${target}> -D OUT=${list_file} -D LABEL=${label}
            -D TIMEOUT=${timeout} -D SHARD=${SOFTVERBS_GTEST_SHARD}
            -P ${PROJECT_SOURCE_DIR}/cmake/gtest_suites_list.cmake
    BYPRODUCTS ${list_file} VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${list_file})
endfunction()

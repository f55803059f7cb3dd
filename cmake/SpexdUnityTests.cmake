# Test binaries compiled as unity builds (-DSPEXD_UNITY_TESTS=ON; scripts/build.sh turns it
# on): most of a test file's compile is parsing the same gtest, gRPC and protobuf headers,
# so eight files per translation unit compile in about a third of the time (docs/reliability.md
# §6). Test files of one binary therefore keep their namespace-level helper names distinct
# (tests/scripts/unity_names_check.py, a ctest, names any clash) and share common helpers
# through the fixture headers.
option(SPEXD_UNITY_TESTS "Compile the test binaries' sources several to a translation unit" OFF)
# 0 = a binary's files in one unit: shows every name two test files share at once.
set(SPEXD_UNITY_BATCH 8 CACHE STRING "Test files per unity translation unit (0: all)")
function(spexd_unity_tests target)
  if(SPEXD_UNITY_TESTS)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${SPEXD_UNITY_BATCH})
  endif()
endfunction()

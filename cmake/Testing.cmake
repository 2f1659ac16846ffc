# tl_add_gtest(<name> SOURCES <files...> LIBS <targets...>): one gtest binary registered with CTest.
include(GoogleTest)
function(tl_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  tl_set_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "TL_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endfunction()

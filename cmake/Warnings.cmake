# One place for the warning flags every target of ours uses.
function(tl_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
  # GCC 12 at -O3 reports false positives inside libstdc++'s std::string and std::variant
  # (-Wrestrict on string concatenation, -Wmaybe-uninitialized on variant moves).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict -Wno-maybe-uninitialized)
  endif()
endfunction()

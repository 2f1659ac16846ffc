# tl_embed_files(<target> BASE_DIR <dir> FILES <files...>)
# Compiles the given text files into <target> as a table of {relative path, contents}, so JIT-compiled
# code can get our headers from the binary itself instead of from a source tree that may have moved.
# The table is reached through `const rt::EmbeddedFile* <target>_embedded_files(size_t* count)`.
set(TL_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake)
function(tl_embed_files target)
  cmake_parse_arguments(ARG "" "BASE_DIR" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_embedded.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DBASE_DIR=${ARG_BASE_DIR} -DSYMBOL=${target}_embedded_files
            "-DFILES=${ARG_FILES}" -P ${TL_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${TL_EMBED_SCRIPT}
    COMMENT "Embedding ${target} files"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()

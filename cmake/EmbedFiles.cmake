# tl_embed_files(<target> [NAME <name>] BASE_DIR <dir> FILES <files...>)
# Compiles the given text files into <target> as a table of {relative path, contents}, so JIT-compiled
# code can get our headers from the binary itself instead of from a source tree that may have moved.
# The table is reached through `const rt::EmbeddedFile* <name>_embedded_files(size_t* count)`; <name>
# defaults to <target> (a target holding several tables, each with its own BASE_DIR, names them).
set(TL_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake)
function(tl_embed_files target)
  cmake_parse_arguments(ARG "" "NAME;BASE_DIR" "FILES" ${ARGN})
  if(NOT ARG_NAME)
    set(ARG_NAME ${target})
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_embedded.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DBASE_DIR=${ARG_BASE_DIR} -DSYMBOL=${ARG_NAME}_embedded_files
            "-DFILES=${ARG_FILES}" -P ${TL_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${TL_EMBED_SCRIPT}
    COMMENT "Embedding ${ARG_NAME} files"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()

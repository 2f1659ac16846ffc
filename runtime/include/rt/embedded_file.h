// A text file compiled into a binary (see cmake/EmbedFiles.cmake): JIT compilers get our device
// headers from here, so a binary works wherever it is copied.
#pragma once

namespace rt {

struct EmbeddedFile {
  const char* path;      // relative path, as used in #include
  const char* contents;  // the whole file
};

}  // namespace rt

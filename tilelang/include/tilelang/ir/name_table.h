// Unique, readable names for variables and buffers, whose identities are pointers: the first one
// called "i" keeps "i", the next gets "i_1". Printers and code generators use one table each.
#pragma once

#include <map>
#include <set>
#include <string>

namespace tilelang::ir {

class NameTable {
 public:
  // Names in `reserved` (keywords of the target language, say) are never handed out.
  explicit NameTable(std::set<std::string> reserved = {}) : used_(std::move(reserved)) {}
  const std::string& name(const void* key, const std::string& hint);

 private:
  std::map<const void*, std::string> names_;
  std::set<std::string> used_;
};

}  // namespace tilelang::ir

#include "tilelang/ir/name_table.h"

#include <cctype>

namespace tilelang::ir {

const std::string& NameTable::name(const void* key, const std::string& hint) {
  auto it = names_.find(key);
  if (it != names_.end()) return it->second;
  std::string base;
  for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
  std::string candidate = base;
  for (int n = 1; used_.count(candidate); ++n) candidate = base + "_" + std::to_string(n);
  used_.insert(candidate);
  return names_.emplace(key, candidate).first->second;
}

}  // namespace tilelang::ir

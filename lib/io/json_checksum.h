// The content checksum of a sealed JSON file (manifest.json, profile.json):
// XXH64 of json::dump() of the top-level object without its "checksum"
// member (keys sorted, no whitespace), fed one array element at a time so
// that no whole-file string is built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hash.h"

namespace eq::io {

// `size(key, value)`: the element count of an array member fed element by
// element, or size_t(-1) to feed the member's dump() whole; `element(key,
// value, i)`: the dump() of element i. A writer that holds the entries as
// structs passes its own (the same text from the struct as from the file).
template <class Size, class Element>
uint64_t canonical_json_xxh64(const nlohmann::json& top, Size size, Element element) {
  using nlohmann::json;
  Xxhash64 h;
  auto feed = [&](const std::string& s) { h.update(s.data(), s.size()); };
  feed("{");
  bool first = true;
  for (auto it = top.begin(); it != top.end(); ++it) {
    if (it.key() == "checksum") continue;
    feed((first ? "" : ",") + json(it.key()).dump() + ":");
    first = false;
    const size_t n = size(it.key(), it.value());
    if (n == size_t(-1)) {
      feed(it.value().dump());
      continue;
    }
    feed("[");
    for (size_t i = 0; i < n; ++i) feed((i ? "," : "") + element(it.key(), it.value(), i));
    feed("]");
  }
  feed("}");
  return h.digest();
}

// The same of a parsed file: every array member element by element; 0 for a
// JSON that is not an object.
inline uint64_t canonical_json_xxh64(const nlohmann::json& j) {
  using nlohmann::json;
  if (!j.is_object()) return 0;
  auto size = [](const std::string&, const json& v) { return v.is_array() ? v.size() : size_t(-1); };
  auto element = [](const std::string&, const json& v, size_t i) { return v[i].dump(); };
  return canonical_json_xxh64(j, size, element);
}

}  // namespace eq::io

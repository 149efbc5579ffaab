// Reading the components of tokenizer.json (normalizers, pre-tokenizers,
// decoders, ...) through io::JsonNode.
#pragma once

#include <string>
#include <vector>

#include "io/json_node.h"

namespace eq::tokenizer {

using io::JsonNode;

// The components of a Sequence: each element of node[key] through `make`,
// null results (components that do nothing) left out.
template <class Make>
auto sequence_of(const JsonNode& node, const char* key, Make make) {
  const JsonNode list = node.at(key);
  list.require_array();
  std::vector<decltype(make(list))> parts;
  for (size_t i = 0; i < list.value().size(); ++i)
    if (auto p = make(list.index(i))) parts.push_back(std::move(p));
  return parts;
}

// exit 4: a component of `kind` (normalizer, model, ...) this tokenizer does not implement.
[[noreturn]] inline void refuse_component(const JsonNode& node, const std::string& kind, const std::string& name) {
  node.unsupported(kind + " \"" + name +
                   "\" is not supported (refused rather than tokenizing differently from the reference)");
}

}  // namespace eq::tokenizer

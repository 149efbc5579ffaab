// Reading the components of tokenizer.json (normalizers, pre-tokenizers,
// decoders, ...) through io::JsonNode.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json_node.h"
#include "tokenizer/tokenizer.h"

namespace eq::tokenizer {

using io::JsonNode;

// The most text any component may produce for one document: the normalized
// text, the pieces a pre-tokenizer Sequence holds at once, each word handed
// to the model, and (for decoding) the text of each decoder stage beyond
// kDecodeGrowth times its input. Twice a document leaves room for the
// byte-level alphabet (two bytes per non-ASCII byte) and Metaspace's marks;
// a component that produces more (a chain of Replace, a content longer than
// what it replaces) is refused, kResource, naming the file and component.
inline constexpr size_t kMaxComponentBytes = 2 * kMaxDocumentBytes;
// The special tokens a post-processor may put around one sequence.
inline constexpr size_t kMaxSpecialTokens = 1024;

// "<file>: field '<path>'": names a component in errors raised while it runs.
inline std::string component_label(const JsonNode& node) { return node.file() + ": field '" + node.path() + "'"; }

// kResource: the component `label` produced `bytes` of text, more than `limit`.
[[noreturn]] inline void component_too_large(const std::string& label, size_t bytes, size_t limit) {
  fail(ErrorKind::kResource, label + ": produces " + std::to_string(bytes) + " bytes of text, more than the bound of " +
                                 std::to_string(limit) + " for one document");
}

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

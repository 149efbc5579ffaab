// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): cut normalized text into
// the words the model encodes one by one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_node.h"

namespace eq::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces. `at_text_start`: the first piece
  // begins the whole input (Metaspace's prepend_scheme "first" needs it).
  virtual void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const = 0;
  // True when pieces come out in the byte-level alphabet (ByteLevel).
  virtual bool byte_level() const { return false; }
};

// Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit. Anything else is refused (exit 4) naming
// the component. `node` null: no pre-tokenizer.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonNode& node);

}  // namespace eq::tokenizer

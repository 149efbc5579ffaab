// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): cut normalized text into
// the words the model encodes one by one. Pieces are handed on as they are
// found (a Sequence passes each piece of one stage through the next before
// the following piece), so memory does not grow with the text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/component.h"
#include "tokenizer/split_behavior.h"

namespace eq::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Hands the pieces of `text` to `emit`, in order. at_text_start: `text`
  // begins the whole input (Metaspace's prepend_scheme "first" needs it).
  virtual void split(std::string_view text, bool at_text_start, const PieceSink& emit) const = 0;

  // All pieces of `text` (tests, small inputs).
  std::vector<std::string> pieces(std::string_view text, bool at_text_start) const;
};

// Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit. Anything else is refused (exit 4) naming the component.
// `node` null: no pre-tokenizer.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonNode& node);

}  // namespace eq::tokenizer

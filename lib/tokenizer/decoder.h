// Decoders of tokenizer.json ("decoder"): turn the token strings of ids back
// into text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/component.h"

namespace eq::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings (a decoder may join them).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. Anything
// else is refused (exit 4) naming the component. `node` null: no decoder.
std::unique_ptr<Decoder> make_decoder(const JsonNode& node);

}  // namespace eq::tokenizer

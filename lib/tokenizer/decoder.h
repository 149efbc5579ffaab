// Decoders of tokenizer.json ("decoder"): turn the token strings of ids back
// into text.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/component.h"

namespace eq::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings (a decoder may join them). A
  // component whose tokens would hold more than `max_bytes` in all (one that
  // multiplies the text, such as Replace) is refused (kResource) naming its
  // file and field, before it holds more than that.
  virtual void decode_chain(std::vector<std::string>& tokens, size_t max_bytes) const = 0;
};

// The bound decode gives its decoder: kDecodeGrowth times the bytes of the
// token strings, and kMaxComponentBytes more.
inline constexpr size_t kDecodeGrowth = 4;

// ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. Anything
// else is refused (exit 4) naming the component. `node` null: no decoder.
std::unique_ptr<Decoder> make_decoder(const JsonNode& node);

}  // namespace eq::tokenizer

// Normalizers of tokenizer.json ("normalizer"): rewrite each stretch of text
// between added tokens before it is split into words.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tokenizer/component.h"

namespace eq::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text`; a component whose result would pass `max_bytes` (one
  // that multiplies the text, such as Replace) is refused (kResource) naming
  // its file and field, before it holds more than that.
  virtual void normalize(std::string& text, size_t max_bytes) const = 0;
};

// Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip. Anything
// else is refused (exit 4) naming the component. `node` null: no normalizer.
std::unique_ptr<Normalizer> make_normalizer(const JsonNode& node);

}  // namespace eq::tokenizer

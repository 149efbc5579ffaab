// Text of generated tokens as they come. Decoding token by token is not
// exact (a token may end inside a character the next completes; decoders strip
// or join across tokens), so each step decodes all tokens so far and releases
// only what extends the text already released and does not end inside a
// character: what is printed is, at the end, exactly decode(all tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace eq::tokenizer {

class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tok) : tok_(tok) {}
  // Adds a token; returns the text it made final ("" while it waits).
  std::string push(int32_t id);
  // The text not released yet, once no token follows.
  std::string finish();
  // decode(all tokens pushed).
  const std::string& text() const { return text_; }

 private:
  const Tokenizer& tok_;
  std::vector<int32_t> ids_;
  std::string text_, released_;
};

}  // namespace eq::tokenizer

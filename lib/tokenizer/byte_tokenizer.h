// The tokenizer of byte-level models (vocabulary 256): each byte is its id.
#pragma once

#include "tokenizer/tokenizer.h"

namespace eq::tokenizer {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  int64_t vocab_size() const override { return 256; }
  std::string source() const override { return "bytes"; }
};

}  // namespace eq::tokenizer

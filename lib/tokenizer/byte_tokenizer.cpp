#include "tokenizer/byte_tokenizer.h"

#include "core/error.h"

namespace eq::tokenizer {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids, bool) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > 255)
      eq::invalid("token " + std::to_string(i) + ": id " + std::to_string(ids[i]) +
                  " is not a byte (the byte tokenizer has ids 0..255)");
    out[i] = static_cast<char>(ids[i]);
  }
  return out;
}

}  // namespace eq::tokenizer

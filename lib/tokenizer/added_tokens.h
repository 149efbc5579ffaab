// Added tokens of tokenizer.json ("added_tokens"): strings matched in the text
// before anything else touches it and given their id whole. Tokens marked
// "normalized" are matched after the normalizer ran, the others in the raw text;
// at each position the longest token wins, leftmost match first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/component.h"
#include "tokenizer/vocab.h"

namespace eq::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;  // only between non-word characters
  bool lstrip = false;       // takes the whitespace before it
  bool rstrip = false;       // takes the whitespace after it
  bool normalized = false;
};

// A stretch of text: an added token (id >= 0) or plain text (id -1).
struct Segment {
  size_t begin, end;
  int32_t id;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // Reads the list; ids must be unique and within range (exit 2 naming the entry).
  explicit AddedTokens(const JsonNode& list);

  // Cuts `text` into segments with the tokens whose `normalized` flag equals
  // `normalized` (one pass before, one after normalization).
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& all() const { return tokens_; }
  bool any(bool normalized) const { return normalized ? any_normalized_ : any_raw_; }

 private:
  std::vector<AddedToken> tokens_;
  // Per first byte, indices into tokens_ ordered longest first.
  std::vector<std::vector<uint32_t>> by_first_byte_ = std::vector<std::vector<uint32_t>>(256);
  TokenMap by_content_;
  std::vector<int32_t> index_of_id_;
  bool any_normalized_ = false, any_raw_ = false;
};

}  // namespace eq::tokenizer

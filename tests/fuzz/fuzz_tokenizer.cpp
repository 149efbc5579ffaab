// tokenizer.json files. The input up to its first NUL byte is the file; what
// follows is a text that a tokenizer which loads encodes (with and without
// special tokens) and decodes again.
#include <algorithm>
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "tokenizer/tokenizer.h"

EQ_FUZZ_TARGET(tokenizer) {
  const auto* bytes = reinterpret_cast<const char*>(input.data());
  const std::string_view all(bytes, input.size());
  const size_t nul = std::min(all.find('\0'), all.size());
  const auto tok = eq::tokenizer::parse_tokenizer_json(all.substr(0, nul), "fuzz-tokenizer.json");
  const std::string_view text = nul < all.size() ? all.substr(nul + 1) : std::string_view("Hello, world! 123");
  for (const bool special : {false, true}) {
    const auto ids = tok->encode(text, special);
    tok->decode(ids, special);
  }
}

// Generated tokens to text as they come: what is released is, joined, exactly
// the decoding of all tokens, and a character split over byte-fallback tokens
// waits until it is complete.
#include <gtest/gtest.h>

#include "test_support.h"
#include "tokenizer/decode_stream.h"

namespace eq {
namespace {

std::unique_ptr<tokenizer::Tokenizer> llama2() {
  const auto dir = test::source_dir() / "tests/data/tokenizers/llama2";
  return tokenizer::load_tokenizer_file((dir / "tokenizer.json.zst").string(), (dir / "tokenizer_config.json").string());
}

TEST(DecodeStream, ReleasedTextJoinsToTheWholeDecoding) {
  const auto tok = llama2();
  const std::string text = "Hello world, \xF0\x9D\x94\x98 and caf\xC3\xA9\n  done";  // 𝔘 is four <0xXX> tokens
  const std::vector<int32_t> ids = tok->encode(text, false);
  tokenizer::DecodeStream stream(*tok);
  std::string joined;
  std::vector<std::string> parts;
  for (int32_t id : ids) parts.push_back(stream.push(id)), joined += parts.back();
  joined += stream.finish();
  EXPECT_EQ(joined, tok->decode(ids, false));
  EXPECT_EQ(joined, text);
  EXPECT_EQ(stream.text(), joined);
  EXPECT_EQ(parts[0], "Hello");
  EXPECT_EQ(parts[1], " world");  // the space of "▁world" kept mid-text
  // The four byte tokens of 𝔘: nothing until the last, then the character whole.
  constexpr int32_t kByteF0 = 3 + 0xF0;  // <0xF0>: the byte tokens follow <unk>, <s>, </s>
  size_t first = 0;
  while (first < ids.size() && ids[first] != kByteF0) ++first;
  ASSERT_LT(first + 3, ids.size());
  EXPECT_EQ(parts[first], "");
  EXPECT_EQ(parts[first + 1], "");
  EXPECT_EQ(parts[first + 2], "");
  EXPECT_EQ(parts[first + 3], "\xF0\x9D\x94\x98");
}

}  // namespace
}  // namespace eq

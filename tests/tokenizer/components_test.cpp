// Components the four reference tokenizers do not use, on small hand-made
// tokenizer files: Metaspace, Digits, Punctuation, Whitespace, NFKC,
// Lowercase, Strip, split behaviours, added-token options.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <utf8proc.h>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"
#include "core/utf8.h"
#include "tokenizer/split_behavior.h"
#include "tokenizer/tokenizer.h"

namespace eq {
namespace {

// Vocabulary: every character of `chars` (as itself) plus `extra` tokens; no merges.
std::unique_ptr<tokenizer::Tokenizer> make(const std::string& tag, const std::string& parts,
                                           const std::vector<std::string>& tokens) {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  const std::string text = "{" + parts + "\"model\": {\"type\": \"BPE\", \"vocab\": " + vocab.dump() + ", \"merges\": []}}";
  const auto path = test::temp_dir(tag) / "tokenizer.json";
  std::ofstream(path) << text;
  return tokenizer::load_tokenizer_file(path.string());
}

std::vector<std::string> split(const std::string& text, const std::vector<std::pair<size_t, size_t>>& m,
                               tokenizer::SplitBehavior b, bool invert = false) {
  std::vector<std::string> out;
  tokenizer::split_at_matches(text, m, b, invert, out);
  return out;
}

TEST(TokenizerComponents, SplitBehaviours) {
  using B = tokenizer::SplitBehavior;
  // "a--b-c" with the '-' characters matched one by one.
  const std::string t = "a--b-c";
  const std::vector<std::pair<size_t, size_t>> m{{1, 2}, {2, 3}, {4, 5}};
  using V = std::vector<std::string>;
  EXPECT_EQ(split(t, m, B::kIsolated), (V{"a", "-", "-", "b", "-", "c"}));
  EXPECT_EQ(split(t, m, B::kRemoved), (V{"a", "b", "c"}));
  EXPECT_EQ(split(t, m, B::kContiguous), (V{"a", "--", "b", "-", "c"}));
  EXPECT_EQ(split(t, m, B::kMergedWithPrevious), (V{"a-", "-", "b-", "c"}));
  EXPECT_EQ(split(t, m, B::kMergedWithNext), (V{"a", "-", "-b", "-c"}));
  EXPECT_EQ(split(t, m, B::kRemoved, true), (V{"-", "-", "-"}));
}

TEST(TokenizerComponents, MetaspaceRoundTrip) {
  const std::string sp = "\xE2\x96\x81";
  const auto tok = make("tok_meta",
                        "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"" + sp +
                            "\", \"prepend_scheme\": \"always\", \"split\": true}, \"decoder\": {\"type\": \"Metaspace\", "
                            "\"replacement\": \"" + sp + "\", \"prepend_scheme\": \"always\", \"split\": true}, ",
                        {sp, "a", "b"});
  EXPECT_EQ(tok->encode("a b", false), (std::vector<int32_t>{0, 1, 0, 2}));
  EXPECT_EQ(tok->decode(tok->encode("a b", false), false), "a b");
}

TEST(TokenizerComponents, DigitsPunctuationWhitespace) {
  const auto digits = make("tok_digits", R"("pre_tokenizer": {"type": "Digits", "individual_digits": false}, )",
                           {"1", "2", "12", "x"});
  EXPECT_EQ(digits->encode("x12", false), (std::vector<int32_t>{3, 0, 1}));
  const auto ws = make("tok_ws", R"("pre_tokenizer": {"type": "Whitespace"}, )", {"a", "b", "!"});
  EXPECT_EQ(ws->encode("a  b!", false), (std::vector<int32_t>{0, 1, 2}));
  const auto punct = make("tok_punct", R"("pre_tokenizer": {"type": "Punctuation", "behavior": "Removed"}, )", {"a", "b"});
  EXPECT_EQ(punct->encode("a,b.", false), (std::vector<int32_t>{0, 1}));
}

TEST(TokenizerComponents, NormalizersNfkcLowercaseStrip) {
  const auto tok = make("tok_norm",
                        R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": true, "strip_right": true}]}, )",
                        {"a", "b", "1"});
  // Fullwidth A and superscript one become "a" and "1"; the spaces are stripped.
  EXPECT_EQ(tok->encode("  \xEF\xBC\xA1" "B\xC2\xB9  ", false), (std::vector<int32_t>{0, 1, 2}));
}

// The normalizers send only the stretches around non-ASCII code points
// through utf8proc; the result must be that of normalizing the whole text.
TEST(TokenizerComponents, NormalizationFormsEqualWholeTextNormalization) {
  const std::vector<char32_t> pool{'a', 'e', 'A', ' ', '\n', 0xE9, 0xC5, 0x0301, 0x030A, 0x0327, 0x0323, 0x1100, 0x1161,
                                   0x11A8, 0xAC00, 0xFB01, 0x2460, 0xB2, 0xA0, 0x212B, 0x1E0A, 0x0344, 0x0F73, 0x3000};
  std::mt19937 rng(7);
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"}) {
    const nlohmann::json j = {{"type", form}};
    const std::string file = "test";
    const auto norm = tokenizer::make_normalizer(tokenizer::JsonNode(j, file, "normalizer"));
    const std::string f = form;
    const utf8proc_option_t opt = utf8proc_option_t(
        UTF8PROC_STABLE | (f[2] == 'C' || f[3] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) | (f[2] == 'K' ? UTF8PROC_COMPAT : 0));
    for (int k = 0; k < 300; ++k) {
      std::string text;
      const size_t len = rng() % 12;
      for (size_t i = 0; i < len; ++i) utf8_append(text, pool[rng() % pool.size()]);
      std::string got = text;
      norm->normalize(got, tokenizer::kMaxComponentBytes);
      utf8proc_uint8_t* whole = nullptr;
      const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                  static_cast<utf8proc_ssize_t>(text.size()), &whole, opt);
      ASSERT_GE(n, 0);
      EXPECT_EQ(got, std::string(reinterpret_cast<const char*>(whole), static_cast<size_t>(n))) << form << " " << text;
      std::free(whole);
    }
  }
}

TEST(TokenizerComponents, ByteLevelWithItsOwnRegex) {
  const nlohmann::json j = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const std::string file = "test";
  const auto pre = tokenizer::make_pre_tokenizer(tokenizer::JsonNode(j, file, "pre_tokenizer"));
  EXPECT_EQ(pre->pieces("Hello world's  12!!\n", true), (std::vector<std::string>{"Hello", "\xC4\xA0world", "'s", "\xC4\xA0", "\xC4\xA0" "12", "!!", "\xC4\x8A"}));
}

TEST(TokenizerComponents, LowercaseIsUnicodeAware) {
  EXPECT_EQ(tokenizer::to_lowercase("\xC3\x89T\xC3\x89 \xC4\xB0"), "\xC3\xA9t\xC3\xA9 i\xCC\x87");
}

TEST(TokenizerComponents, AddedTokenStripAndSingleWord) {
  const auto tok = make(
      "tok_added",
      R"("added_tokens": [{"id": 3, "content": "<m>", "special": true, "lstrip": true, "rstrip": true, "normalized": false},
                          {"id": 4, "content": "ab", "special": false, "single_word": true, "normalized": false}], )",
      {"a", "b", " "});
  EXPECT_EQ(tok->encode("a <m> b", false), (std::vector<int32_t>{0, 3, 1}));
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{4}));
  EXPECT_EQ(tok->encode("aab", false), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{0, 3, 1}, true), "a b");
}

}  // namespace
}  // namespace eq

// tokenizer.json files that are valid but hostile: Sequences of any length run
// without a stack frame per stage, and a component that multiplies the text
// (or the special tokens) is refused naming the file and component, before
// it holds more than the bound. Ids the reference would assign differently
// are refused naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "tokenizer/component.h"
#include "tokenizer/tokenizer.h"

namespace eq {
namespace {

const std::string kModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

std::string write_tokenizer(const std::string& tag, const std::string& json) {
  const auto path = test::temp_dir(tag) / "tokenizer.json";
  std::ofstream(path, std::ios::binary) << json;
  return path.string();
}

// {"type": "Sequence", key: [stage, stage, ...]} with `n` copies of `stage`.
std::string sequence(const std::string& key, const std::string& stage, size_t n) {
  std::string s = "{\"type\": \"Sequence\", \"" + key + "\": [";
  s.reserve(s.size() + n * (stage.size() + 1) + 2);
  for (size_t i = 0; i < n; ++i) (s += i ? "," : "") += stage;
  return s + "]}";
}

std::string tokenizer_json(const std::string& extra, const std::string& added = "[]") {
  return "{\"version\": \"1.0\", \"added_tokens\": " + added + ", " + extra + "\"model\": " + kModel + "}";
}

// The eq::Error `f` throws; a failure when it throws none.
Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorKind::kInternal, "");
}

void expect_message(const Error& e, ErrorKind kind, const std::vector<std::string>& parts) {
  EXPECT_EQ(e.kind(), kind) << e.what();
  for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
}

constexpr size_t kStages = 100000;

// One stack frame per stage overflowed the stack here (each stage is valid,
// and the reference accepts the file).
TEST(TokenizerBounds, PreTokenizerSequenceOf100000StagesRuns) {
  const std::string path = write_tokenizer(
      "seq-pre", tokenizer_json("\"pre_tokenizer\": " + sequence("pretokenizers", R"({"type": "WhitespaceSplit"})", kStages) + ", "));
  const auto tok = tokenizer::load_tokenizer_file(path);
  EXPECT_EQ(tok->encode("ab  ab b a", false), (std::vector<int32_t>{2, 2, 1, 0}));
}

TEST(TokenizerBounds, NormalizerDecoderAndPostProcessorSequencesOf100000StagesRun) {
  const std::string path = write_tokenizer(
      "seq-other",
      tokenizer_json("\"normalizer\": " + sequence("normalizers", R"({"type": "Lowercase"})", kStages) +
                     ", \"decoder\": " + sequence("decoders", R"({"type": "Fuse"})", kStages) +
                     ", \"post_processor\": " + sequence("processors", R"({"type": "ByteLevel"})", kStages) + ", "));
  const auto tok = tokenizer::load_tokenizer_file(path);
  EXPECT_EQ(tok->encode("ABab", true), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{2, 1, 0}, false), "abba");
}

// A tokenizer whose `component` is a Sequence (its stages under `key`) of 40
// Replace stages that each make 4 bytes of one: 4^40 bytes after them.
std::string replace_chain(const std::string& tag, const std::string& component, const std::string& key) {
  const std::string stage = R"({"type": "Replace", "pattern": {"String": "a"}, "content": "aaaa"})";
  return write_tokenizer(tag, tokenizer_json("\"" + component + "\": " + sequence(key, stage, 40) + ", "));
}

// Refused at the stage that would pass the bound.
TEST(TokenizerBounds, ChainedReplaceNormalizersAreRefusedAtTheBound) {
  const std::string path = replace_chain("replace-chain", "normalizer", "normalizers");
  const auto tok = tokenizer::load_tokenizer_file(path);
  EXPECT_EQ(tok->encode("b", false), (std::vector<int32_t>{1}));
  const Error e = error_of([&] { tok->encode("a", false); });
  // 4^12 bytes pass, 4^13 = 2^26 would be more than 2^25.
  expect_message(e, ErrorKind::kResource,
                 {path + ": field 'normalizer.normalizers[12].pattern': produces ",
                  "more than the bound of " + std::to_string(tokenizer::kMaxComponentBytes) + " for one document"});
}

TEST(TokenizerBounds, ChainedReplaceDecodersAreRefusedAtTheBound) {
  const std::string path = replace_chain("replace-dec", "decoder", "decoders");
  const auto tok = tokenizer::load_tokenizer_file(path);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1}, false), "b");
  const Error e = error_of([&] { tok->decode(std::vector<int32_t>{0}, false); });
  expect_message(e, ErrorKind::kResource, {path + ": field 'decoder.decoders[12].pattern': produces "});
}

// ByteLevel doubles every byte above 0x7F: stages of it double the pieces a
// Sequence holds until the bound refuses them.
TEST(TokenizerBounds, GrowingPreTokenizerSequenceIsRefusedAtTheBound) {
  const std::string path = write_tokenizer(
      "bytelevel-chain",
      tokenizer_json("\"pre_tokenizer\": " +
                     sequence("pretokenizers", R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})",
                              40) +
                     ", "));
  const auto tok = tokenizer::load_tokenizer_file(path);
  const Error e = error_of([&] { tok->encode("\xC3\xA9", false); });
  expect_message(e, ErrorKind::kResource,
                 {path + ": field 'pre_tokenizer': produces ",
                  "more than the bound of " + std::to_string(tokenizer::kMaxComponentBytes)});
}

// A special token of 1,000 ids repeated 1,000 times: a million ids around
// every sequence, refused when the template is read.
TEST(TokenizerBounds, TemplateRepeatingALongSpecialTokenIsRefused) {
  std::string ids = "[";
  for (int i = 0; i < 1000; ++i) ids += std::string(i ? "," : "") + "0";
  ids += "]";
  std::string single = "[{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}";
  for (int i = 0; i < 1000; ++i) single += R"(, {"SpecialToken": {"id": "<s>", "type_id": 0}})";
  single += "]";
  const std::string path = write_tokenizer(
      "template-repeat",
      tokenizer_json("\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": " + single +
                     ", \"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": " + ids +
                     ", \"tokens\": [\"<s>\"]}}}, "));
  const Error e = error_of([&] { tokenizer::load_tokenizer_file(path); });
  expect_message(e, ErrorKind::kResource,
                 {path + ": field 'post_processor.single': puts more than " +
                  std::to_string(tokenizer::kMaxSpecialTokens) + " special tokens around a sequence"});
}

TEST(TokenizerBounds, EncodeRefusesATextLongerThanADocument) {
  const std::string path = write_tokenizer("long-doc", tokenizer_json(""));
  const auto tok = tokenizer::load_tokenizer_file(path);
  const std::string text(tokenizer::kMaxDocumentBytes + 1, 'a');
  const Error e = error_of([&] { tok->encode(text, false); });
  expect_message(e, ErrorKind::kResource,
                 {path + ": a text of " + std::to_string(text.size()) + " bytes is more than one document may hold (" +
                  std::to_string(tokenizer::kMaxDocumentBytes) + " bytes)"});
}

// The reference reads one of String and Regex; which one is not ours to guess.
TEST(TokenizerBounds, SplitPatternWithStringAndRegexIsRefused) {
  const std::string path = write_tokenizer(
      "split-both", tokenizer_json(R"("pre_tokenizer": {"type": "Split", "pattern": {"String": " ", "Regex": "b"}, )"
                                   R"("behavior": "Removed", "invert": false}, )"));
  const Error e = error_of([&] { tokenizer::load_tokenizer_file(path); });
  expect_message(e, ErrorKind::kInvalidInput,
                 {path + ": field 'pre_tokenizer.pattern': expected {\"String\": ...} or {\"Regex\": ...}, found both"});
}

// The reference gives an added token the vocabulary's id for its content, or
// one past the vocabulary: a file that says otherwise encodes differently.
TEST(TokenizerBounds, AddedTokenIdThatIsAnotherVocabTokenIsRefused) {
  const std::string other = write_tokenizer(
      "added-collide", tokenizer_json("", R"([{"id": 1, "content": "<x>", "special": true}])"));
  const Error e = error_of([&] { tokenizer::load_tokenizer_file(other); });
  expect_message(e, ErrorKind::kInvalidInput,
                 {other + ": field 'added_tokens[0].id': id 1 is \"b\" in model.vocab, not \"<x>\""});

  const std::string moved = write_tokenizer(
      "added-moved", tokenizer_json("", R"([{"id": 3, "content": "ab", "special": false}])"));
  const Error m = error_of([&] { tokenizer::load_tokenizer_file(moved); });
  expect_message(m, ErrorKind::kInvalidInput,
                 {moved + ": field 'added_tokens[0].id': \"ab\" is id 2 of model.vocab, not 3"});

  // The same content at the same id, and a new token past the vocabulary, load.
  const std::string fine = write_tokenizer(
      "added-fine", tokenizer_json("", R"([{"id": 2, "content": "ab", "special": false}, {"id": 3, "content": "<x>", "special": true}])"));
  const auto tok = tokenizer::load_tokenizer_file(fine);
  EXPECT_EQ(tok->encode("<x>ab", false), (std::vector<int32_t>{3, 2}));
}

}  // namespace
}  // namespace eq

// Malformed or unsupported tokenizer files: one error naming the file and the
// field, exit 2 for malformed input, exit 4 for components not implemented.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace eq {
namespace {

std::string write_file(const std::string& tag, const std::string& name, const std::string& text) {
  const auto dir = test::temp_dir(tag);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// A valid tokenizer.json with `model` and `extra` members spliced in.
std::string tokenizer_json(const std::string& model, const std::string& extra = "") {
  return "{\"version\": \"1.0\", \"added_tokens\": [], " + extra + "\"model\": " + model + "}";
}

const std::string kModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

// The error `load_tokenizer_file` throws for `text`, which must be one.
Error load_error(const std::string& tag, const std::string& text, std::string* path_out = nullptr) {
  const std::string path = write_file(tag, "tokenizer.json", text);
  if (path_out) *path_out = path;
  try {
    tokenizer::load_tokenizer_file(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << tag << ": loaded without an error";
  return Error(ErrorKind::kInternal, "");
}

void expect_names(const Error& e, ErrorKind kind, const std::string& path, const std::string& field) {
  EXPECT_EQ(e.kind(), kind) << e.what();
  const std::string msg = e.what();
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find(field), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(TokenizerErrors, ValidMinimalFileLoads) {
  const auto tok = tokenizer::load_tokenizer_file(write_file("tok_ok", "tokenizer.json", tokenizer_json(kModel)));
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok->vocab_size(), 3);
}

TEST(TokenizerErrors, NotJson) {
  std::string path;
  const Error e = load_error("tok_notjson", "{\"model\": [1, 2", &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "not valid JSON");
}

TEST(TokenizerErrors, MissingModel) {
  std::string path;
  const Error e = load_error("tok_nomodel", R"({"version": "1.0", "added_tokens": []})", &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "field 'model': missing");
}

TEST(TokenizerErrors, MergeNamingAnUnknownToken) {
  std::string path;
  const Error e = load_error(
      "tok_merge", tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", "a zz"]})"),
      &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "model.merges[1]");
  EXPECT_NE(std::string(e.what()).find("\"zz\""), std::string::npos) << e.what();
}

TEST(TokenizerErrors, MergeWhoseResultIsNotInTheVocabulary) {
  std::string path;
  const Error e = load_error("tok_merge2", tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]})"), &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "model.merges[0]");
}

TEST(TokenizerErrors, IdOutOfRange) {
  std::string path;
  Error e = load_error("tok_range", tokenizer_json(R"({"type": "BPE", "vocab": {"a": -1}, "merges": []})"), &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "model.vocab[\"a\"]");
  e = load_error("tok_range2", tokenizer_json(kModel, R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [99], "tokens": ["<s>"]}}}, )"),
                 &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "post_processor");
}

TEST(TokenizerErrors, DuplicateVocabularyIds) {
  std::string path;
  const Error e = load_error("tok_dup", tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []})"), &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "is already");
  const Error e2 = load_error(
      "tok_dup2",
      "{\"added_tokens\": [{\"id\": 5, \"content\": \"<x>\", \"special\": true}, {\"id\": 5, \"content\": \"<y>\", \"special\": true}], \"model\": " +
          kModel + "}",
      &path);
  expect_names(e2, ErrorKind::kInvalidInput, path, "added_tokens[1].id");
}

TEST(TokenizerErrors, UnsupportedComponentsAreRefusedByName) {
  std::string path;
  Error e = load_error("tok_wp", tokenizer_json(R"({"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"})"), &path);
  expect_names(e, ErrorKind::kUnsupported, path, "model \"WordPiece\"");
  e = load_error("tok_uni", tokenizer_json(R"({"type": "Unigram", "vocab": [["a", 0.0]]})"), &path);
  expect_names(e, ErrorKind::kUnsupported, path, "model \"Unigram\"");
  e = load_error("tok_norm", tokenizer_json(kModel, R"("normalizer": {"type": "BertNormalizer"}, )"), &path);
  expect_names(e, ErrorKind::kUnsupported, path, "normalizer \"BertNormalizer\"");
  e = load_error("tok_pre", tokenizer_json(kModel, R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}, )"), &path);
  expect_names(e, ErrorKind::kUnsupported, path, "pre_tokenizer.pretokenizers[0]");
  e = load_error("tok_dec", tokenizer_json(kModel, R"("decoder": {"type": "WordPiece"}, )"), &path);
  expect_names(e, ErrorKind::kUnsupported, path, "decoder \"WordPiece\"");
}

TEST(TokenizerErrors, BadRegexNamesItsField) {
  std::string path;
  const Error e = load_error("tok_re", tokenizer_json(kModel, R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": false}, )"), &path);
  expect_names(e, ErrorKind::kInvalidInput, path, "pre_tokenizer.pattern.Regex");
}

TEST(TokenizerErrors, VocabularyLargerThanTheModelNamesBoth) {
  const auto dir = test::temp_dir("tok_model_vocab");
  std::ofstream(dir / "tokenizer.json") << tokenizer_json(kModel);
  try {
    tokenizer::load_tokenizer(dir.string(), 2);
    FAIL() << "a 3-token tokenizer was accepted for a model of 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocab_size is 2"), std::string::npos) << msg;
  }
}

TEST(TokenizerErrors, NoTokenizerFileAndNoByteVocabulary) {
  const auto dir = test::temp_dir("tok_none");
  try {
    tokenizer::load_tokenizer(dir.string(), 1000);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  // With a vocabulary of 256 the byte tokenizer stands in.
  const auto bytes = tokenizer::load_tokenizer(dir.string(), 256);
  EXPECT_EQ(bytes->source(), "bytes");
  EXPECT_EQ(bytes->encode("A\xff", true), (std::vector<int32_t>{65, 255}));
  const std::vector<int32_t> ids{104, 105};
  EXPECT_EQ(bytes->decode(ids, false), "hi");
}

TEST(TokenizerErrors, DecodingAnIdWithoutATokenNamesItsPosition) {
  const auto tok = tokenizer::load_tokenizer_file(write_file("tok_dec_id", "tokenizer.json", tokenizer_json(kModel)));
  const std::vector<int32_t> ids{0, 1, 7};
  try {
    tok->decode(ids, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("token 2: id 7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq

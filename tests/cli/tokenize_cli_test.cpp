// expertquant tokenize: ids of a text with a tokenizer.json or a model's
// tokenizer, ids back to text, and one error line for bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

const std::filesystem::path& llama2_dir() {
  static const auto d = test::source_dir() / "tests/data/tokenizers/llama2";
  return d;
}

std::string write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

TEST(TokenizeCli, EncodesAndDecodesWithATokenizerFile) {
  const auto dir = test::temp_dir("tokcli_roundtrip");
  const std::string text = write(dir / "in.txt", "Hello world");
  const std::string tok = (llama2_dir() / "tokenizer.json.zst").string();
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + tok + " --text " + text + " --json 2>&1", &out), 0) << out;
  const auto ids = nlohmann::json::parse(out).get<std::vector<int32_t>>();
  // <s> from the post-processor, then "▁Hello" "▁world".
  ASSERT_EQ(ids.size(), 3u) << out;
  EXPECT_EQ(ids[0], 1);
  ASSERT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + tok + " --text " + text + " --no-special 2>&1", &out), 0) << out;
  EXPECT_EQ(out, std::to_string(ids[1]) + " " + std::to_string(ids[2]) + "\n");
  const std::string id_file = write(dir / "ids.json", nlohmann::json(ids).dump());
  ASSERT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + tok + " --decode --tokens " + id_file + " --no-special 2>&1", &out), 0) << out;
  EXPECT_EQ(out, "Hello world");
}

TEST(TokenizeCli, ByteLevelModelUsesBytes) {
  const auto dir = test::temp_dir("tokcli_bytes");
  const std::string text = write(dir / "in.txt", "Hi");
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " tokenize --model " + (test::data_dir() / "tinymoe").string() + " --text " + text + " 2>&1", &out), 0) << out;
  EXPECT_EQ(out, "72 105\n");
}

TEST(TokenizeCli, ModelFolderTokenizerMustFitTheModelVocabulary) {
  const auto dir = test::temp_dir("tokcli_model");
  std::filesystem::copy_file(llama2_dir() / "tokenizer.json.zst", dir / "tokenizer.json.zst");
  std::filesystem::copy_file(llama2_dir() / "tokenizer_config.json", dir / "tokenizer_config.json");
  const std::string text = write(dir / "in.txt", "Hello world");
  write(dir / "config.json", R"({"model_type": "mistral", "vocab_size": 32000})");
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " tokenize --model " + dir.string() + " --text " + text + " --no-special 2>&1", &out), 0) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), ' '), 1) << out;  // two ids
  write(dir / "config.json", R"({"vocab_size": 1000})");
  EXPECT_EQ(test::run_command(test::binary() + " tokenize --model " + dir.string() + " --text " + text + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("vocab_size is 1000"), std::string::npos) << out;
  EXPECT_NE(out.find("tokenizer.json.zst"), std::string::npos) << out;
}

TEST(TokenizeCli, BadInputsExitWithOneLineNamingThem) {
  const auto dir = test::temp_dir("tokcli_bad");
  const std::string text = write(dir / "in.txt", "Hi");
  const std::string broken = write(dir / "tokenizer.json", "{\"model\": ");
  std::string out;
  EXPECT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + broken + " --text " + text + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find(broken), std::string::npos) << out;
  EXPECT_NE(out.find("not valid JSON"), std::string::npos) << out;

  const std::string wordpiece = write(dir / "wp.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  EXPECT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + wordpiece + " --text " + text + " 2>&1", &out), 4) << out;
  EXPECT_NE(out.find("model \"WordPiece\""), std::string::npos) << out;

  const std::string ids = write(dir / "ids.json", "[1, 40000]");
  const std::string tok = (llama2_dir() / "tokenizer.json.zst").string();
  EXPECT_EQ(test::run_command(test::binary() + " tokenize --tokenizer " + tok + " --decode --tokens " + ids + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find(ids), std::string::npos) << out;

  EXPECT_EQ(test::run_command(test::binary() + " tokenize --text " + text + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("--model"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq

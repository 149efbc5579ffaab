// Text through every command of a model with a real tokenizer: a random
// checkpoint carrying the llama2 tokenizer (32000 ids, bos added) goes
// profile --calib text -> pack -> eval --text -> generate --prompt, and each
// step's token counts are the tokenizer's encoding of the text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/random_moe.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace eq {
namespace {

using nlohmann::json;

const std::string kDocA =
    "The river runs past the old mill, where the wheel has not turned for forty years. "
    "Children still come to throw stones into the water and count the rings.\n"
    "Café owners say the tourists arrive in June — 1234567 of them, by one count.";
const std::string kDocB = "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n";

std::filesystem::path llama2_model(const std::filesystem::path& dir) {
  test::RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 64;
  spec.experts = 4;
  spec.layers = 1;
  spec.tokenizer = test::source_dir() / "tests/data/tokenizers/llama2";
  return test::write_random_moe(dir, spec);
}

std::string write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// stdout alone (run_command adds stderr to what it captures).
int run_stdout(const std::string& args, std::string* out) {
  return test::run_command("(" + test::binary() + " " + args + " 2>/dev/null)", out);
}

json run_json(const std::string& args) {
  std::string out;
  const int rc = run_stdout(args, &out);
  EXPECT_EQ(rc, 0) << args << "\n" << out;
  return rc == 0 ? json::parse(out) : json();
}

// Tokens scored by ctx-token windows cut inside each document (a window's
// first token is not scored).
int64_t scored(const std::vector<size_t>& doc_lengths, int64_t ctx) {
  int64_t n = 0;
  for (size_t len : doc_lengths) n += int64_t(len) - (int64_t(len) + ctx - 1) / ctx;
  return n;
}

TEST(TextPipelineCli, ProfilePackEvalGenerateEncodeTextWithTheModelsTokenizer) {
  const auto dir = test::temp_dir("text_pipeline");
  const auto model = llama2_model(dir / "model");
  const auto tok = tokenizer::load_tokenizer(model.string(), 32000);
  ASSERT_EQ(tok->vocab_size(), 32000);
  const std::string text = write(dir / "calib.txt", kDocA);
  const std::vector<int32_t> ids = tok->encode(kDocA, true);
  ASSERT_EQ(ids.front(), 1);  // <s>: the config adds bos
  ASSERT_GT(ids.size(), 40u);

  const std::string m = model.string(), packed = (dir / "packed").string();
  const json p = run_json("profile --model " + m + " --calib " + text + " --ctx 16 --min-tokens 1 -o " +
                          (dir / "profile.json").string() + " --json");
  const json slice = json::parse(std::ifstream(dir / "profile.json")).at("calibration").at("slices").at(0);
  EXPECT_EQ(slice.at("kind"), "text");
  EXPECT_EQ(slice.at("tokens").get<size_t>(), ids.size());
  EXPECT_EQ(slice.at("windows").get<size_t>(), (ids.size() + 15) / 16);

  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + m + " --profile " + (dir / "profile.json").string() +
                                  " -o " + packed + " 2>&1",
                              &out),
            0)
      << out;
  ASSERT_TRUE(std::filesystem::exists(dir / "packed" / "tokenizer.json"));

  const json e = run_json("eval --packed " + packed + " --model " + m + " --text " + text +
                          " --ctx 16 --no-latency --no-collapse --json");
  const json& overall = e.at("quality").at("overall");
  EXPECT_EQ(overall.at("unit"), "bits_per_token");
  EXPECT_EQ(overall.at("scored_tokens").get<int64_t>(), scored({ids.size()}, 16));

  // tune reads the same text through the packed folder's tokenizer copy.
  const json t = run_json("tune --packed " + packed + " --text " + text +
                          " --sweep 1,2 --reps 1 --warmup 0 --dry-run --json");
  EXPECT_TRUE(t.at("output").is_null());
  EXPECT_TRUE(t.at("runtime_config").contains("sort_cutoff"));

  const std::string prompt = "The river runs past";
  const std::vector<int32_t> prompt_ids = tok->encode(prompt, true);
  const json g = run_json("generate --packed " + packed + " --prompt '" + prompt + "' -n 12 --json");
  EXPECT_EQ(g.at("prompt_tokens").get<size_t>(), prompt_ids.size());
  const auto new_ids = g.at("tokens").get<std::vector<int32_t>>();
  ASSERT_EQ(new_ids.size(), 12u);
  const std::string decoded = tok->decode(new_ids, false);
  EXPECT_EQ(g.at("text").get<std::string>(), valid_utf8(decoded));
  // Without --json the text itself is printed (greedy: the same tokens).
  ASSERT_EQ(run_stdout("generate --packed " + packed + " --prompt '" + prompt + "' -n 12", &out), 0) << out;
  EXPECT_EQ(out, decoded + "\n");
}

TEST(TextPipelineCli, DocumentSeparatorKeepsWindowsInsideDocuments) {
  const auto dir = test::temp_dir("text_docs");
  const auto model = llama2_model(dir / "model");
  const auto tok = tokenizer::load_tokenizer(model.string(), 32000);
  const std::string text = write(dir / "two.txt", kDocA + "\n<doc>\n" + kDocB);
  const size_t a = tok->encode(kDocA, true).size(), b = tok->encode(kDocB, true).size();
  const std::string m = model.string();
  run_json("profile --model " + m + " --calib " + text + " --doc-separator '\\n<doc>\\n' --ctx 16 --min-tokens 1 "
           "--no-sensitivity -o " + (dir / "profile.json").string() + " --json");
  const json slice = json::parse(std::ifstream(dir / "profile.json")).at("calibration").at("slices").at(0);
  EXPECT_EQ(slice.at("tokens").get<size_t>(), a + b);
  EXPECT_EQ(slice.at("windows").get<size_t>(), (a + 15) / 16 + (b + 15) / 16);

  const json ppl = run_json("perplexity --model " + m + " --text " + text + " --doc-separator '\\n<doc>\\n' --ctx 16 --json");
  EXPECT_EQ(ppl.at("tokens").get<size_t>(), a + b);
  EXPECT_EQ(ppl.at("scored_tokens").get<int64_t>(), scored({a, b}, 16));
  EXPECT_TRUE(ppl.contains("bits_per_token"));
  // A separator for token ids is refused naming the option.
  write(dir / "ids.json", "[1, 450, 8580]");
  std::string out;
  EXPECT_EQ(test::run_command(test::binary() + " perplexity --model " + m + " --tokens " + (dir / "ids.json").string() +
                                  " --doc-separator x",
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("--doc-separator: applies to --text"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::binary() + " profile --model " + m + " --calib " + (dir / "ids.json").string() +
                                  " --doc-separator x -o " + (dir / "p2.json").string(),
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("--doc-separator: --calib " + (dir / "ids.json").string() + " is read as token ids"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "p2.json"));
  // Without the separator the file is one document: one bos, windows across.
  const json whole = run_json("perplexity --model " + m + " --text " + text + " --ctx 16 --json");
  const size_t all = tok->encode(kDocA + "\n<doc>\n" + kDocB, true).size();
  EXPECT_EQ(whole.at("tokens").get<size_t>(), all);
  EXPECT_EQ(whole.at("scored_tokens").get<int64_t>(), scored({all}, 16));
}

TEST(TextPipelineCli, TextForAModelWithoutTokenizerNamesTheFolder) {
  const auto dir = test::temp_dir("text_no_tokenizer");
  const auto model = llama2_model(dir / "model");
  std::filesystem::remove(model / "tokenizer.json");
  const std::string text = write(dir / "calib.txt", kDocA);
  std::string out;
  EXPECT_EQ(test::run_command(test::binary() + " profile --model " + model.string() + " --calib " + text + " -o " +
                                  (dir / "p.json").string() + " 2>&1",
                              &out),
            2)
      << out;
  EXPECT_NE(out.find(model.string() + ": no tokenizer.json, and the model's vocabulary (32000) is not bytes"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pass token ids"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "p.json"));
  // Token ids still work, and generate prints ids when it has no tokenizer.
  write(dir / "ids.json", "[1, 450, 8580, 6057]");
  EXPECT_EQ(run_stdout("generate --model " + model.string() + " --tokens " + (dir / "ids.json").string() + " -n 3", &out),
            0)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), ' '), 3) << out;
}

}  // namespace
}  // namespace eq

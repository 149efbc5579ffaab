// Inputs that used to hang, exhaust the machine or print a meaningless
// result, end to end through the expertquant binary: a FIFO in place of any
// input file, a text too large to read whole, an empty text, absurd option
// values, a model that produces NaN logits, a config.json whose layer count
// disagrees with the tensors. Each gives one line naming the file, field or
// option and an exit code of 2-5. Every test writes its own inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "hardening/cli_checks.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

std::string tinymoe() { return (test::data_dir() / "tinymoe").string(); }

int run(const std::string& args, std::string* out) { return test::run_cli(args, out); }

void expect_error(int rc, const std::string& out, int code, const std::vector<std::string>& needles) {
  test::expect_cli_error(rc, out, code, needles);
}

fs::path copy_tinymoe(const std::string& tag) {
  const fs::path dir = test::temp_dir(tag) / "model";
  fs::copy(tinymoe(), dir, fs::copy_options::recursive);
  return dir;
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void make_fifo(const fs::path& p) {
  fs::remove(p);
  ASSERT_EQ(mkfifo(p.c_str(), 0644), 0) << std::strerror(errno);
}

TEST(InputFaults, FifoInPlaceOfAnyInputIsRefusedWithoutBlocking) {
  const fs::path cfg_dir = copy_tinymoe("fifo-config");
  make_fifo(cfg_dir / "config.json");
  std::string out;
  expect_error(run("inspect " + cfg_dir.string(), &out), out, 2, {"config.json: not a regular file"});

  const fs::path shard_dir = copy_tinymoe("fifo-shard");
  make_fifo(shard_dir / "model.safetensors");
  expect_error(run("inspect " + shard_dir.string(), &out), out, 2, {"model.safetensors: not a regular file"});
  expect_error(run("perplexity --model " + shard_dir.string() + " --text /dev/null", &out), out, 2,
               {"model.safetensors: not a regular file"});

  const fs::path index_dir = copy_tinymoe("fifo-index");
  make_fifo(index_dir / "model.safetensors.index.json");
  expect_error(run("inspect " + index_dir.string(), &out), out, 2,
               {"model.safetensors.index.json: not a regular file"});

  const fs::path dir = test::temp_dir("fifo-inputs");
  const fs::path fifo = dir / "input.fifo";
  make_fifo(fifo);
  expect_error(run("perplexity --model " + tinymoe() + " --text " + fifo.string(), &out), out, 2,
               {fifo.string() + ": not a regular file"});
  expect_error(run("perplexity --model " + tinymoe() + " --tokens " + fifo.string(), &out), out, 2,
               {fifo.string() + ": not a regular file"});
  expect_error(run("generate --model " + tinymoe() + " --prompt-file " + fifo.string(), &out), out, 2,
               {fifo.string() + ": not a regular file"});
  expect_error(run("profile --model " + tinymoe() + " --calib " + fifo.string() + " -o " + (dir / "p.json").string(),
                   &out),
               out, 2, {fifo.string() + ": not a regular file"});
  expect_error(run("profile --model " + tinymoe() + " --router-logits " + fifo.string() + " -o " +
                       (dir / "p.json").string(),
                   &out),
               out, 2, {fifo.string() + ": not a regular file"});
  expect_error(run("pack --model " + tinymoe() + " --allocation " + fifo.string() + " -o " + (dir / "out").string(),
                   &out),
               out, 2, {fifo.string() + ": not a regular file"});
  expect_error(run("profile --merge " + fifo.string() + " -o " + (dir / "p.json").string(), &out), out, 2,
               {fifo.string() + ": not a regular file"});
  expect_error(run("profile --model " + tinymoe() + " --calib /dev/null --policy " + fifo.string() + " -o " +
                       (dir / "p.json").string(),
                   &out),
               out, 2, {fifo.string() + ": not a regular file"});
  // A folder where a file belongs is refused the same way.
  expect_error(run("perplexity --model " + tinymoe() + " --text " + dir.string(), &out), out, 2,
               {dir.string() + ": not a regular file"});
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// A sparse 2 GiB text (no disk used): read whole it is over the cap; with
// --max-tokens only its start is read.
TEST(InputFaults, TextLargerThanTheCapNeedsMaxTokens) {
  const fs::path big = test::temp_dir("big-text") / "big.txt";
  { std::ofstream(big, std::ios::binary); }
  fs::resize_file(big, uint64_t(2) << 30);
  std::string out;
  expect_error(run("perplexity --model " + tinymoe() + " --text " + big.string(), &out), out, 5,
               {big.string() + ": text larger than the limit of " + std::to_string(io::kMaxTextBytes) + " bytes",
                "--max-tokens"});
  const int rc = run("perplexity --model " + tinymoe() + " --text " + big.string() + " --max-tokens 300 --json 2>/dev/null", &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["tokens"].get<int64_t>(), 300);
}

// A zstd corpus is decompressed only as far as --max-tokens needs.
TEST(InputFaults, CompressedTextStopsAtMaxTokens) {
  std::string text;
  for (int i = 0; text.size() < (4u << 20); ++i) text += "line " + std::to_string(i) + " of a long corpus\n";
  const auto packed = io::zstd_compress(text.data(), text.size(), 3);
  const fs::path p = test::temp_dir("zst-text") / "corpus.txt.zst";
  write_text(p, std::string(packed.begin(), packed.end()));
  std::string out;
  ASSERT_EQ(run("perplexity --model " + tinymoe() + " --text " + p.string() + " --max-tokens 200 --json 2>/dev/null", &out), 0)
      << out;
  EXPECT_EQ(nlohmann::json::parse(out)["tokens"].get<int64_t>(), 200);
}

TEST(InputFaults, EmptyTextIsAnErrorNamingTheFile) {
  const fs::path dir = test::temp_dir("empty-text");
  write_text(dir / "empty.txt", "");
  write_text(dir / "one.txt", "x");
  std::string out;
  expect_error(run("perplexity --model " + tinymoe() + " --text " + (dir / "empty.txt").string(), &out), out, 2,
               {(dir / "empty.txt").string() + ": empty: too few tokens"});
  expect_error(run("perplexity --model " + tinymoe() + " --text " + (dir / "one.txt").string(), &out), out, 2,
               {(dir / "one.txt").string() + ": only 1 token"});
  const fs::path packed = dir / "packed";
  ASSERT_EQ(run("pack --model " + tinymoe() + " --uniform int8_row --threads 1 -o " + packed.string(), &out), 0) << out;
  expect_error(run("eval --packed " + packed.string() + " --text " + (dir / "empty.txt").string(), &out), out, 2,
               {(dir / "empty.txt").string() + ": empty: too few tokens"});
  expect_error(run("profile --model " + tinymoe() + " --calib " + (dir / "empty.txt").string() + " -o " +
                       (dir / "p.json").string(),
                   &out),
               out, 2, {(dir / "empty.txt").string() + ": empty"});
  expect_error(run("generate --model " + tinymoe() + " --prompt-file " + (dir / "empty.txt").string(), &out), out, 2,
               {(dir / "empty.txt").string() + ": empty prompt"});
  // Given but empty is an empty prompt, not a missing one (tinymoe's byte
  // tokenizer adds no special tokens).
  expect_error(run("generate --model " + tinymoe() + " --prompt ''", &out), out, 2, {"--prompt: empty prompt"});
  EXPECT_FALSE(fs::exists(dir / "p.json"));
}

TEST(InputFaults, ThreadCountAboveTheCpusIsLoweredWithANote) {
  const fs::path p = test::temp_dir("threads") / "t.txt";
  write_text(p, std::string(200, 'a'));
  std::string out;
  ASSERT_EQ(run("perplexity --model " + tinymoe() + " --text " + p.string() + " --threads 100000", &out), 0) << out;
  EXPECT_NE(out.find("note: --threads 100000 is more than the"), std::string::npos) << out;
  expect_error(run("perplexity --model " + tinymoe() + " --text " + p.string() + " --threads=-1", &out), out, 2,
               {"--threads"});
}

// Every numeric option: a value out of its range is refused while the command
// line is parsed, naming the option (exit 2, never std::bad_alloc or a
// message about KV-cache internals).
TEST(InputFaults, OutOfRangeOptionsNameTheOption) {
  const std::string m = " --model " + tinymoe();
  const std::string pk = " --packed /nonexistent --text /nonexistent";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"profile" + m + " --calib x -o /nonexistent/p.json --target-bits nan", "--target-bits"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --target-bits inf", "--target-bits"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --target-bits 0", "--target-bits"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --target-bits 1000", "--target-bits"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --ctx 0", "--ctx"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --max-tokens=-5", "--max-tokens"},
      {"profile" + m + " --calib x -o /nonexistent/p.json --min-tokens=-1", "--min-tokens"},
      {"generate" + m + " --prompt a --temperature nan", "--temperature"},
      {"generate" + m + " --prompt a --temperature=-1", "--temperature"},
      {"generate" + m + " --prompt a --top-p 2", "--top-p"},
      {"generate" + m + " --prompt a --top-p 0", "--top-p"},
      {"generate" + m + " --prompt a --top-p nan", "--top-p"},
      {"generate" + m + " --prompt a --max-new-tokens=-3", "--max-new-tokens"},
      {"eval" + pk + " --sweep 100000000", "--sweep"},
      {"eval" + pk + " --decode-tokens 0", "--decode-tokens"},
      {"eval" + pk + " --prefill-tokens=-5", "--prefill-tokens"},
      {"eval" + pk + " --batch-windows 0", "--batch-windows"},
      {"eval" + pk + " --ctx 1", "--ctx"},
      {"eval" + pk + " --reps 0", "--reps"},
      {"eval" + pk + " --new-tokens 0", "--new-tokens"},
      {"eval" + pk + " --max-tokens=-1", "--max-tokens"},
      {"eval" + pk + " --sort-cutoff=-2", "--sort-cutoff"},
      {"perplexity" + m + " --text x --batch 0", "--batch"},
      {"perplexity" + m + " --text x --ctx 1", "--ctx"},
      {"perplexity" + m + " --text x --ctx 99999999999", "--ctx"},
      {"tune --packed /nonexistent --text x --reps 0", "--reps"},
      {"tune --packed /nonexistent --text x --sweep 0", "--sweep"},
      {"verify /nonexistent --samples=-1", "--samples"},
  };
  for (const auto& [args, option] : cases) {
    SCOPED_TRACE(args);
    std::string out;
    const int rc = run(args, &out);
    expect_error(rc, out, 2, {option});
    EXPECT_EQ(out.find("bad_alloc"), std::string::npos) << out;
    EXPECT_EQ(out.find("KV cache"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "not one line: " << out;
  }
}

// The bytes of one tensor inside a single-file checkpoint.
void overwrite_tensor(const fs::path& file, const std::string& name, uint16_t bf16_value) {
  uint64_t data_start = 0;
  uint64_t begin = 0, nbytes = 0;
  {
    const auto st = io::SafetensorsFile::open(file.string());
    const io::TensorInfo* t = st->find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->dtype, DType::kBF16);
    begin = t->begin;
    nbytes = t->nbytes();
    std::ifstream in(file, std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    for (int i = 7; i >= 0; --i) data_start = (data_start << 8) | len[i];
    data_start += 8;
  }
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(std::streamoff(data_start + begin));
  for (uint64_t i = 0; i < nbytes / 2; ++i) f.write(reinterpret_cast<const char*>(&bf16_value), 2);
}

TEST(InputFaults, NanLogitsAreAnErrorNeverAPrintedResult) {
  const fs::path dir = copy_tinymoe("nan-model");
  // Finite weights (a NaN weight is refused on read, nonfinite_weights_cli_test)
  // large enough that the logits overflow.
  overwrite_tensor(dir / "model.safetensors", "model.norm.weight", 0x7f7f);  // bf16 3.4e38
  const fs::path text = dir.parent_path() / "t.txt";
  write_text(text, std::string(300, 'a'));
  std::string out;
  expect_error(run("perplexity --model " + dir.string() + " --text " + text.string(), &out), out, 2,
               {"is nan", "non-finite logits"});
  EXPECT_EQ(out.find("bits per byte"), std::string::npos) << out;
  // A pack of it scored alone: the packed model's bits are the figure that goes non-finite.
  const fs::path packed = dir.parent_path() / "packed";
  ASSERT_EQ(run("pack --model " + dir.string() + " --uniform int8_row --threads 1 -o " + packed.string(), &out), 0)
      << out;
  const fs::path report = dir.parent_path() / "report.json";
  expect_error(run("eval --packed " + packed.string() + " --text " + text.string() +
                       " --no-latency --no-collapse --json-out " + report.string(),
                   &out),
               out, 2, {"bits per token of the packed model is nan"});
  EXPECT_FALSE(fs::exists(report));
}

// A side file the pack copies when it ships (generation_config.json) is
// refused as any other input when it is a FIFO, never taken for absent.
TEST(InputFaults, FifoSideFileIsRefusedNotSkipped) {
  const fs::path dir = copy_tinymoe("fifo-generation-config");
  make_fifo(dir / "generation_config.json");
  const fs::path packed = dir.parent_path() / "packed";
  std::string out;
  expect_error(run("pack --model " + dir.string() + " --uniform int8_row --threads 1 -o " + packed.string(), &out),
               out, 2, {"generation_config.json: not a regular file"});
  EXPECT_FALSE(fs::exists(packed));
}

TEST(InputFaults, ConfigLayerCountMustMatchTheTensors) {
  const fs::path dir = copy_tinymoe("layers");
  auto cfg = nlohmann::json::parse(read_text(dir / "config.json"));
  cfg["num_hidden_layers"] = 3;
  write_text(dir / "config.json", cfg.dump());
  std::string out;
  expect_error(run("inspect " + dir.string(), &out), out, 2, {"model.layers.3.", "num_hidden_layers' is 3"});
  expect_error(run("perplexity --model " + dir.string() + " --text /dev/null", &out), out, 2,
               {"model.layers.3.", "num_hidden_layers"});
}

}  // namespace
}  // namespace eq

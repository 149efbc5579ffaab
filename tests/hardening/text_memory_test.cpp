// A 2 GiB text in a ~200 KB zstd file (the same compressed frame of lines
// repeated: valid multi-frame zstd) given to every command that reads text:
// each refuses it or reads it within a bounded memory, measured as the
// command's peak RSS (a memory bound, not a timing). Under ASan's shadow
// memory RSS says nothing of the code, so those checks are skipped there.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/hash.h"
#include "io/text_file.h"
#include "support/random_moe.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

constexpr long kMaxRssKiB = 1536L << 10;  // 1.5 GiB
constexpr size_t kFrameBytes = size_t{1} << 20;
constexpr int kFrames = 2048;  // 2 GiB of text

std::string frame_text() {
  std::string text;
  for (int i = 0; text.size() < kFrameBytes; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 10) + "\n";
  text.resize(kFrameBytes);
  text.back() = '\n';
  return text;
}

struct BigText {
  fs::path dir, text, model;
  uint64_t xxh64 = 0;  // of the 2 GiB content
};

const BigText& big_text() {
  static const BigText t = [] {
    BigText b;
    b.dir = test::temp_dir("text-memory");
    b.text = b.dir / "big.txt.zst";
    const std::string frame = frame_text();
    const auto packed = io::zstd_compress(frame.data(), frame.size(), 19);
    std::ofstream out(b.text, std::ios::binary);
    Xxhash64 h;
    for (int i = 0; i < kFrames; ++i) {
      out.write(reinterpret_cast<const char*>(packed.data()), static_cast<std::streamsize>(packed.size()));
      h.update(frame.data(), frame.size());
    }
    b.xxh64 = h.digest();
    test::RandomMoeSpec spec;
    spec.tokenizer = test::source_dir() / "tests" / "data" / "tokenizers" / "llama2";
    b.model = test::write_random_moe(b.dir / "model", spec);
    return b;
  }();
  return t;
}

struct Child {
  int rc = -1;
  long max_rss_kib = 0;
  std::string output;
};

// Runs the expertquant binary with `args` (no shell: the child's own peak RSS
// comes back from wait4), stdout and stderr into a file.
Child run(const std::vector<std::string>& args) {
  const fs::path log = test::temp_dir("text-memory-log") / "out.txt";
  std::vector<std::string> argv_s = {test::binary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Child c;
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return c;
  c.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.max_rss_kib = usage.ru_maxrss;
  std::ifstream in(log, std::ios::binary);
  c.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return c;
}

void expect_bounded(const Child& c) {
  if (eq::built_with_sanitizers()) GTEST_SKIP() << "peak RSS is not meaningful under ASan's shadow memory";
  std::cout << "peak RSS " << c.max_rss_kib << " KiB\n";
  EXPECT_GT(c.max_rss_kib, 0);
  EXPECT_LT(c.max_rss_kib, kMaxRssKiB) << c.output;
}

void expect_has(const Child& c, const std::string& needle) {
  EXPECT_NE(c.output.find(needle), std::string::npos) << "missing '" << needle << "' in: " << c.output;
}

const std::string kDocumentBound = std::to_string(tokenizer::kMaxDocumentBytes);

// A text is one document: refused once it passes what one may hold, with no
// advice to pass an option tokenize does not have.
TEST(TextMemory, TokenizeRefusesA2GiBTextWithinTheBound) {
  const BigText& b = big_text();
  const Child c = run({"tokenize", "--model", b.model.string(), "--text", b.text.string()});
  EXPECT_EQ(c.rc, 5) << c.output;
  expect_has(c, b.text.string() + ": text larger than the limit of " + kDocumentBound + " bytes");
  EXPECT_EQ(c.output.find("--max-tokens"), std::string::npos) << c.output;
  expect_bounded(c);
}

TEST(TextMemory, GeneratePromptFileRefusesA2GiBTextWithinTheBound) {
  const BigText& b = big_text();
  const Child c = run({"generate", "--model", b.model.string(), "--prompt-file", b.text.string(), "-n", "1"});
  EXPECT_EQ(c.rc, 5) << c.output;
  expect_has(c, b.text.string() + ": text larger than the limit of " + kDocumentBound + " bytes");
  EXPECT_EQ(c.output.find("--max-tokens"), std::string::npos) << c.output;
  expect_bounded(c);
}

// Read whole (no --max-tokens): its size is counted a chunk at a time and
// refused before any of it is encoded; the advice names the option it lacks.
TEST(TextMemory, PerplexityRefusesA2GiBTextReadWholeWithinTheBound) {
  const BigText& b = big_text();
  const Child c = run({"perplexity", "--model", b.model.string(), "--text", b.text.string()});
  EXPECT_EQ(c.rc, 5) << c.output;
  expect_has(c, b.text.string() + ": text larger than the limit of " + std::to_string(io::kMaxTextBytes) +
                    " bytes (pass --max-tokens to use only its start)");
  expect_bounded(c);
}

// With --max-tokens the documents are read as they complete and the read
// stops at the tokens asked for.
TEST(TextMemory, PerplexityReadsTheStartOfA2GiBTextWithinTheBound) {
  const BigText& b = big_text();
  const Child c = run({"perplexity", "--model", b.model.string(), "--text", b.text.string(), "--max-tokens", "256",
                       "--doc-separator", "\n", "--ctx", "64", "--json"});
  ASSERT_EQ(c.rc, 0) << c.output;
  const auto at = c.output.find('{');
  ASSERT_NE(at, std::string::npos) << c.output;
  EXPECT_EQ(nlohmann::json::parse(c.output.substr(at))["tokens"].get<int64_t>(), 256) << c.output;
  expect_bounded(c);
}

// One document of 2 GiB: refused once it passes the document bound, naming
// the document and the option that ends documents.
TEST(TextMemory, PerplexityRefusesA2GiBDocumentWithinTheBound) {
  const BigText& b = big_text();
  const Child c = run({"perplexity", "--model", b.model.string(), "--text", b.text.string(), "--max-tokens", "2048"});
  EXPECT_EQ(c.rc, 5) << c.output;
  expect_has(c, b.text.string() + ": document 1 is longer than " + kDocumentBound + " bytes");
  expect_has(c, "--doc-separator");
  EXPECT_EQ(c.output.find("pass --max-tokens"), std::string::npos) << c.output;
  expect_bounded(c);
}

// profile --calib hashes the whole file (what --merge compares) as a stream.
TEST(TextMemory, ProfileCalibReadsTheStartOfA2GiBTextAndHashesAllOfItWithinTheBound) {
  const BigText& b = big_text();
  const fs::path out = test::temp_dir("text-memory-profile") / "profile.json";
  const Child c = run({"profile", "--model", b.model.string(), "--calib", b.text.string(), "--max-tokens", "256",
                       "--doc-separator", "\n", "--ctx", "64", "--min-tokens", "1", "--no-sensitivity", "-o",
                       out.string()});
  ASSERT_EQ(c.rc, 0) << c.output;
  std::ifstream in(out);
  const nlohmann::json p = nlohmann::json::parse(in);
  const auto& slice = p["calibration"]["slices"][0];
  EXPECT_EQ(slice["tokens"].get<int64_t>(), 256);
  EXPECT_EQ(slice["file_xxh64"].get<std::string>(), hash_hex(b.xxh64));
  EXPECT_EQ(slice["xxh64"].get<std::string>(), hash_hex(b.xxh64));
  expect_bounded(c);
}

}  // namespace
}  // namespace eq

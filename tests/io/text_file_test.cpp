#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "io/text_file.h"
#include "test_support.h"

namespace eq {
namespace {

void write(const std::string& path, const void* data, size_t n) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

TEST(TextFile, ZstdRoundTripAndPlainPassThrough) {
  std::mt19937 rng(1);
  std::string text;
  for (int i = 0; i < 300000; ++i) text.push_back(static_cast<char>('a' + rng() % 7));
  auto z = io::zstd_compress(text.data(), text.size(), 5);
  EXPECT_LT(z.size(), text.size());
  auto dir = test::temp_dir("text");
  write((dir / "t.zst").string(), z.data(), z.size());
  write((dir / "t.txt").string(), text.data(), text.size());
  EXPECT_EQ(io::read_file_bytes((dir / "t.zst").string()), text);
  EXPECT_EQ(io::read_file_bytes((dir / "t.txt").string()), text);
  // Truncated and corrupt frames are errors naming the file.
  write((dir / "cut.zst").string(), z.data(), z.size() / 2);
  try {
    io::read_file_bytes((dir / "cut.zst").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.zst"), std::string::npos);
  }
  EXPECT_THROW(io::read_file_bytes((dir / "t.zst").string(), 1000), Error);  // size limit
}

TEST(TextFile, BundledCorpusDecompressesCompletely) {
  const auto corpus = test::data_dir() / "corpus";
  EXPECT_EQ(io::read_file_bytes((corpus / "eval_python.txt.zst").string()).size(), 262100u);
  EXPECT_EQ(io::read_file_bytes((corpus / "eval_c.txt.zst").string()).size(), 262127u);
  EXPECT_EQ(io::read_file_bytes((corpus / "eval_prose.txt.zst").string()).size(), 262136u);
  EXPECT_EQ(io::read_file_bytes((corpus / "eval_troff.txt.zst").string()).size(), 262112u);
  const std::string calib = io::read_file_bytes((corpus / "calib_small.txt.zst").string());
  EXPECT_EQ(calib.size(), 165817u);
  if (!test::shared_dir().empty()) {
    std::ifstream in(test::shared_dir() / "corpus/calib_mixed.txt", std::ios::binary);
    std::string head(calib.size(), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    EXPECT_EQ(head, calib);  // an exact prefix of the shared calibration file
  }
}

}  // namespace
}  // namespace eq

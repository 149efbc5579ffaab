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

// read_text_prefix: chunked, stops at the bytes asked for, refuses past the cap.
TEST(TextFile, PrefixStopsEarlyAndWholeReadsAreCapped) {
  const auto dir = test::temp_dir("text-prefix");
  std::string text;
  for (int i = 0; text.size() < (3u << 20); ++i) text += "line " + std::to_string(i) + "\n";
  const std::string plain = (dir / "t.txt").string(), packed = (dir / "t.txt.zst").string();
  write(plain, text.data(), text.size());
  const auto z = io::zstd_compress(text.data(), text.size(), 3);
  write(packed, z.data(), z.size());
  for (const std::string& p : {plain, packed}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(io::read_text_prefix(p, 10), text.substr(0, 10));
    EXPECT_EQ(io::read_text_prefix(p, (1u << 20) + 3), text.substr(0, (1u << 20) + 3));
    EXPECT_EQ(io::read_text_prefix(p, 0), text);
    EXPECT_EQ(io::read_text_prefix(p, text.size() + 100), text);  // asks past the end: all of it
    EXPECT_EQ(io::read_text_prefix(p, 0, text.size()), text);     // exactly the cap
    try {
      io::read_text_prefix(p, 0, 1 << 20);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kResource);
      EXPECT_NE(std::string(e.what()).find(p + ": text larger than the limit of 1048576 bytes"), std::string::npos)
          << e.what();
    }
    // The start of a text over the cap is still readable.
    EXPECT_EQ(io::read_text_prefix(p, 100, 1 << 20), text.substr(0, 100));
  }
  // Two frames back to back, and a frame without a declared size, decode as one text.
  std::vector<uint8_t> two(z);
  two.insert(two.end(), z.begin(), z.end());
  write((dir / "two.zst").string(), two.data(), two.size());
  EXPECT_EQ(io::read_text_prefix((dir / "two.zst").string(), 0), text + text);
  std::vector<uint8_t> rle = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38};  // no size; 8 RLE blocks of 128 KiB of 'q'
  for (int b = 0; b < 8; ++b) {
    const uint32_t header = (128u << 10) << 3 | 1u << 1 | (b == 7 ? 1u : 0u);
    for (int i = 0; i < 3; ++i) rle.push_back(uint8_t(header >> (8 * i)));
    rle.push_back('q');
  }
  write((dir / "rle.zst").string(), rle.data(), rle.size());
  EXPECT_EQ(io::read_text_prefix((dir / "rle.zst").string(), 0), std::string(1u << 20, 'q'));
  EXPECT_THROW(io::read_text_prefix((dir / "rle.zst").string(), 0, 1000), Error);
  // A truncated frame is an error naming the file, not a short text.
  write((dir / "cut.zst").string(), z.data(), z.size() / 2);
  try {
    io::read_text_prefix((dir / "cut.zst").string(), 0);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("cut.zst: truncated zstd data"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq

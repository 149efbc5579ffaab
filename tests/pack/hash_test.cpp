// XXH64 against published vectors (xxHash reference / python-xxhash docs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory.h"

namespace eq {
namespace {

TEST(Xxhash64, KnownVectors) {
  EXPECT_EQ(xxhash64(std::string_view("")), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxhash64(std::string_view("a")), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxhash64(std::string_view("abc")), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxhash64(std::string_view("xxhash")), 0x32DD38952C4BC720ULL);
  EXPECT_EQ(xxhash64(std::string_view("abcdefghijklmnopqrstuvwxyz12345")), 0x467605901B01D6F6ULL);
  // >= 32 bytes: the stripe loop and the merge rounds run.
  EXPECT_EQ(xxhash64(std::string_view("Nobody inspects the spammish repetition")), 0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(xxhash64(std::string_view("The quick brown fox jumps over the lazy dog")), 0x0B242D361FDA71BCULL);
  EXPECT_EQ(xxhash64(std::string(32, 'a')), 0x856E843298F99AD7ULL);
  EXPECT_EQ(xxhash64(std::string_view("0123456789abcdef0123456789abcdef")), 0x642A94958E71E6C5ULL);
}

TEST(Xxhash64, Seeds) {
  EXPECT_EQ(xxhash64(std::string_view(""), 668718853), 0x04E830582A31A119ULL);
  EXPECT_EQ(xxhash64(std::string_view("a"), 191961062), 0x6E05BA2887C97977ULL);
  EXPECT_EQ(xxhash64(std::string_view("abcdefghijklmnopqrstuvwxyz12345"), 877380273), 0x37B562EC5715E132ULL);
  EXPECT_EQ(xxhash64(std::string_view("abc"), 12345), 0x01700E64F6F23509ULL);
}

TEST(Xxhash64, StreamingEqualsOneShotForEverySplit) {
  std::vector<uint8_t> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  for (size_t n : {0, 1, 31, 32, 33, 64, 100, 300})
    for (size_t cut = 0; cut <= n; cut += 7) {
      Xxhash64 h(42);
      h.update(data.data(), cut);
      h.update(data.data() + cut, n - cut);
      EXPECT_EQ(h.digest(), xxhash64(data.data(), n, 42)) << "n=" << n << " cut=" << cut;
    }
}

TEST(Xxhash64, HexRoundTrip) {
  uint64_t v = 0;
  EXPECT_EQ(hash_hex(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_TRUE(parse_hash_hex("0123456789abcdef", &v));
  EXPECT_EQ(v, 0x0123456789abcdefULL);
  EXPECT_FALSE(parse_hash_hex("0123", &v));
  EXPECT_FALSE(parse_hash_hex("0123456789abcdeg", &v));
}

TEST(Memory, ProcFiguresAndByteSizes) {
  EXPECT_GT(current_rss_bytes(), 0u);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes() / 2);
  EXPECT_GT(physical_memory_bytes(), 0u);
  EXPECT_EQ(parse_byte_size("123", "x"), 123u);
  EXPECT_EQ(parse_byte_size("64K", "x"), 65536u);
  EXPECT_EQ(parse_byte_size("1.5G", "x"), 1610612736u);
  EXPECT_EQ(parse_byte_size("2MiB", "x"), 2097152u);
  EXPECT_THROW(parse_byte_size("12Q", "--max-memory"), Error);
  EXPECT_THROW(parse_byte_size("lots", "--max-memory"), Error);
}

}  // namespace
}  // namespace eq

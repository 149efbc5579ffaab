// Token inputs: JSON (flat, nested), .npy (int32/int64, 1-D/2-D), raw u32/i32,
// byte text, and errors that name the file and position; prompt escapes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/prompt_text.h"
#include "io/tokens.h"
#include "test_support.h"

namespace eq::io {
namespace {

std::string npy(const std::string& descr, const std::string& shape, const void* data, size_t bytes) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.append(reinterpret_cast<const char*>(&len), 2);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

std::string expect_error(const std::string& bytes, TokenFileFormat f, const std::string& label) {
  try {
    parse_token_buffer(bytes, f, label);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << label;
  return {};
}

TEST(Tokens, JsonFlatAndNested) {
  auto flat = parse_token_buffer("[1, 2, 3]", TokenFileFormat::kJson, "a.json");
  ASSERT_EQ(flat.sequences.size(), 1u);
  EXPECT_EQ(flat.sequences[0], (std::vector<int32_t>{1, 2, 3}));
  auto nested = parse_token_buffer("[[1, 2], [3]]", TokenFileFormat::kAuto, "b.json");
  ASSERT_EQ(nested.sequences.size(), 2u);
  EXPECT_EQ(nested.sequences[1], (std::vector<int32_t>{3}));
  EXPECT_EQ(nested.total(), 3);
  auto obj = parse_token_buffer("{\"input_ids\": [7]}", TokenFileFormat::kJson, "c.json");
  EXPECT_EQ(obj.sequences[0], (std::vector<int32_t>{7}));
  const std::string err = expect_error("[[1, 2], [3, -4]]", TokenFileFormat::kJson, "bad.json");
  EXPECT_NE(err.find("bad.json"), std::string::npos) << err;
  EXPECT_NE(err.find("[1][1]"), std::string::npos) << err;
  EXPECT_NE(expect_error("[1, 2.5]", TokenFileFormat::kJson, "f.json").find("[1]"), std::string::npos);
}

TEST(Tokens, Npy) {
  const int32_t a[4] = {5, 6, 7, 8};
  auto t = parse_token_buffer(npy("<i4", "(2, 2)", a, sizeof(a)), TokenFileFormat::kAuto, "x.npy");
  ASSERT_EQ(t.sequences.size(), 2u);
  EXPECT_EQ(t.sequences[1], (std::vector<int32_t>{7, 8}));
  const int64_t b[3] = {1, 2, 300};
  auto u = parse_token_buffer(npy("<i8", "(3,)", b, sizeof(b)), TokenFileFormat::kNpy, "y.npy");
  EXPECT_EQ(u.sequences[0], (std::vector<int32_t>{1, 2, 300}));
  const int64_t bad[2] = {1, -1};
  const std::string err = expect_error(npy("<i8", "(2,)", bad, sizeof(bad)), TokenFileFormat::kNpy, "z.npy");
  EXPECT_NE(err.find("z.npy"), std::string::npos);
  EXPECT_NE(err.find("[1]"), std::string::npos) << err;
  EXPECT_NE(expect_error(npy("<f4", "(1,)", a, 4), TokenFileFormat::kNpy, "f.npy").find("f4"), std::string::npos);
  EXPECT_NE(expect_error(npy("<i4", "(3,)", a, 8), TokenFileFormat::kNpy, "short.npy").find("short.npy"),
            std::string::npos);
}

TEST(Tokens, RawU32AndI32) {
  const uint32_t a[3] = {1, 255, 65536};
  std::string bytes(reinterpret_cast<const char*>(a), sizeof(a));
  EXPECT_EQ(parse_token_buffer(bytes, TokenFileFormat::kU32, "t.u32").sequences[0],
            (std::vector<int32_t>{1, 255, 65536}));
  const int32_t b[2] = {3, -2};
  const std::string err =
      expect_error(std::string(reinterpret_cast<const char*>(b), sizeof(b)), TokenFileFormat::kI32, "t.i32");
  EXPECT_NE(err.find("index 1"), std::string::npos) << err;
  EXPECT_NE(expect_error("abc", TokenFileFormat::kU32, "odd.u32").find("multiple of 4"), std::string::npos);
}

TEST(Tokens, UnknownFormatAsksForFlag) {
  EXPECT_NE(expect_error("hello", TokenFileFormat::kAuto, "mystery.dat").find("--tokens-format"), std::string::npos);
}

TEST(Tokens, TokenFileNamesAndRangeNamesPosition) {
  for (const char* name : {"ids.json", "a/b.npy", "x.u32", "x.bin", "x.i32"}) EXPECT_TRUE(names_token_file(name)) << name;
  for (const char* name : {"wiki.txt", "calib.txt.zst", "json", "notes.md"}) EXPECT_FALSE(names_token_file(name)) << name;
  TokenSequences s;
  s.sequences = {{1, 2}, {3, 99}};
  try {
    check_token_range(s, 50, "ids.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1, position 1"), std::string::npos) << e.what();
  }
}

TEST(PromptText, Escapes) {
  EXPECT_EQ(unescape_prompt("import os\\nimport"), "import os\nimport");
  EXPECT_EQ(unescape_prompt("a\\tb\\\\n\\x41\\q"), std::string("a\tb\\nA\\q"));
  EXPECT_EQ(unescape_prompt("end\\"), "end\\");
}

}  // namespace
}  // namespace eq::io

// Text files into token sequences for a model: documents on a separator, each
// encoded whole with the tokenizer's default special tokens, max_tokens cut,
// and the byte tokenizer giving the bytes (and reading only what it keeps).
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "core/hash.h"
#include "test_support.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/text_documents.h"

namespace eq {
namespace {

using tokenizer::TextDocumentOptions;

std::string write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::unique_ptr<tokenizer::Tokenizer> llama2() {
  const auto dir = test::source_dir() / "tests/data/tokenizers/llama2";
  return tokenizer::load_tokenizer_file((dir / "tokenizer.json.zst").string(), (dir / "tokenizer_config.json").string());
}

TEST(TextDocuments, ByteTokenizerGivesTheBytes) {
  const auto dir = test::temp_dir("textdocs_bytes");
  const std::string path = write(dir / "t.txt", "hi\xff there");
  const tokenizer::ByteTokenizer bytes;
  const auto all = tokenizer::read_text_documents(path, bytes, {});
  ASSERT_EQ(all.documents.size(), 1u);
  EXPECT_EQ(all.documents[0], (std::vector<int32_t>{'h', 'i', 255, ' ', 't', 'h', 'e', 'r', 'e'}));
  EXPECT_EQ(all.xxh64, xxhash64(std::string_view("hi\xff there")));
  // max_tokens reads only the bytes kept: the hash is of those.
  const auto start = tokenizer::read_text_documents(path, bytes, {"", 3});
  EXPECT_EQ(start.documents, (std::vector<std::vector<int32_t>>{{'h', 'i', 255}}));
  EXPECT_EQ(start.xxh64, xxhash64(std::string_view("hi\xff")));
  const auto split = tokenizer::read_text_documents(path, bytes, {"\xff", 0});
  EXPECT_EQ(split.documents, (std::vector<std::vector<int32_t>>{{'h', 'i'}, {' ', 't', 'h', 'e', 'r', 'e'}}));
}

TEST(TextDocuments, EachDocumentEncodedWholeWithBosAndEmptyOnesLeftOut) {
  const auto tok = llama2();
  const std::string a = "Hello world", b = "Good night";
  // Joined by append: GCC 12 at -O1 reports false overflows in chained operator+.
  const auto docs = tokenizer::encode_documents(std::string("--").append(a).append("--").append(b).append("----"), *tok,
                                                {"--", 0});
  const std::string joined = std::string(a).append("--").append(b);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], tok->encode(a, true));
  EXPECT_EQ(docs[1], tok->encode(b, true));
  EXPECT_EQ(docs[1].front(), 1);  // <s> starts every document
  EXPECT_EQ(tokenizer::encode_documents(joined, *tok, {}),
            (std::vector<std::vector<int32_t>>{tok->encode(joined, true)}));
  EXPECT_TRUE(tokenizer::encode_documents("----", *tok, {"--", 0}).empty());
  EXPECT_TRUE(tokenizer::encode_documents("", *tok, {}).empty());
}

TEST(TextDocuments, MaxTokensKeepsTheFirstTokensAcrossDocuments) {
  const auto tok = llama2();
  const std::vector<int32_t> a = tok->encode("Hello world", true), b = tok->encode("Good night", true);
  const int64_t keep = static_cast<int64_t>(a.size()) + 1;
  const auto docs = tokenizer::encode_documents("Hello world|Good night|More text", *tok, {"|", keep});
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], a);
  EXPECT_EQ(docs[1], std::vector<int32_t>(b.begin(), b.begin() + 1));
}

// The file is read a chunk (1 MiB) at a time: documents whose separator
// straddles a chunk's end, empty ones and a last one without a separator come
// out as when the text is split whole, and the hash is of the whole file.
TEST(TextDocuments, ReadInChunksGivesTheDocumentsOfTheWholeText) {
  std::string text;
  const std::string sep = "<doc>";
  for (int i = 0; text.size() < (3u << 20); ++i) {
    text += std::string(size_t(1000 + (i * 7919) % 300000), char('a' + i % 26));
    // Separators at and around the chunk boundaries, and empty documents.
    const size_t mib = size_t{1} << 20;
    if (text.size() % mib > mib - 8 || i % 5 == 0) text += sep;
    text += sep;
  }
  text += "tail";
  const auto dir = test::temp_dir("textdocs_chunks");
  const std::string path = write(dir / "t.txt", text);
  const tokenizer::ByteTokenizer bytes;
  for (const size_t cut : {size_t{1} << 20, (size_t{1} << 20) - 2, (size_t{2} << 20) - 4}) {
    // A separator that ends `cut` bytes in: straddles a chunk boundary when cut is just past it.
    std::string t = text;
    t.replace(cut - 3, sep.size(), sep);
    const std::string p = write(dir / "cut.txt", t);
    const auto read = tokenizer::read_text_documents(p, bytes, {sep, 0});
    EXPECT_EQ(read.documents, tokenizer::encode_documents(t, bytes, {sep, 0})) << cut;
    EXPECT_EQ(read.xxh64, xxhash64(t)) << cut;
  }
  // max_tokens: the same first tokens; the rest is read only when its hash is asked for.
  const auto first = tokenizer::read_text_documents(path, bytes, {sep, 1500000});
  EXPECT_EQ(first.documents, tokenizer::encode_documents(text, bytes, {sep, 1500000}));
  EXPECT_EQ(first.xxh64, 0u);
  const auto hashed = tokenizer::read_text_documents(path, bytes, {sep, 1500000}, {true, ""});
  EXPECT_EQ(hashed.documents, first.documents);
  EXPECT_EQ(hashed.xxh64, xxhash64(text));
}

// A tokenizer.json document longer than the bound is refused naming the
// file and the document, before more than a chunk past the bound is read.
TEST(TextDocuments, ADocumentLongerThanTheBoundIsRefused) {
  const auto tok = llama2();
  const auto dir = test::temp_dir("textdocs_long");
  const std::string path =
      write(dir / "t.txt", "short|" + std::string(tokenizer::kMaxDocumentBytes + 1, 'x') + "|short");
  try {
    tokenizer::read_text_documents(path, *tok, {"|", 100});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
    EXPECT_NE(std::string(e.what()).find(path + ": document 2 is longer than " +
                                         std::to_string(tokenizer::kMaxDocumentBytes) + " bytes"),
              std::string::npos)
        << e.what();
  }
  // The first document alone holds the tokens asked for: the long one is never reached.
  EXPECT_EQ(tokenizer::read_text_documents(path, *tok, {"|", 2}).documents.size(), 1u);
}

}  // namespace
}  // namespace eq

// Text inputs for a model, as token sequences: the file is cut into documents
// (on a separator, or the whole file is one), each document is encoded whole
// by the model's tokenizer with the special tokens the reference adds by
// default (bos where its config says so), and callers cut their windows inside
// a document, never across two. One place for every command that reads text
// (profile --calib, perplexity/eval/tune --text, generate --prompt-file).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace eq::tokenizer {

struct TextDocumentOptions {
  // The bytes that end one document and start the next (dropped from both);
  // "" = the whole file is one document.
  std::string separator;
  // > 0: only the first max_tokens tokens are kept (documents past them are
  // not read; the last one kept is cut).
  int64_t max_tokens = 0;
};

// How read_text_documents reads a file beyond what it encodes.
struct TextReadOptions {
  // Read the rest of the file after max_tokens, to hash all of it.
  bool hash_whole_text = false;
  // Appended to the refusal of a text too large to read whole: what the
  // command can do about it (an option it has), or "".
  std::string too_large_advice;
};

// The too_large_advice of a command whose --max-tokens was not given.
inline constexpr const char* kPassMaxTokens = " (pass --max-tokens to use only its start)";

struct TextDocuments {
  std::vector<std::vector<int32_t>> documents;  // empty documents left out
  // XXH64 of the text read (decompressed): all of it, but for the bytes the
  // byte tokenizer keeps under max_tokens with no separator (then of those);
  // 0 when max_tokens stopped the read and hash_whole_text was not asked.
  uint64_t xxh64 = 0;
  int64_t total() const;
};

// Encodes `text` by documents.
std::vector<std::vector<int32_t>> encode_documents(std::string_view text, const Tokenizer& tok,
                                                   const TextDocumentOptions& options);

// Reads `path` (.zst decompressed) a chunk at a time and encodes it by
// documents as they complete, stopping after max_tokens: memory is the
// documents of one chunk and the ids kept, whatever the file's size. A
// document longer than kMaxDocumentBytes (tokenizer.json tokenizers) is
// refused, kResource, naming the file and the document; with max_tokens 0 a
// content above io::kMaxTextBytes is refused before any of it is encoded.
// The byte tokenizer with max_tokens and no separator reads only the bytes it
// keeps, so the start of a corpus of any size costs only that start.
TextDocuments read_text_documents(const std::string& path, const Tokenizer& tok, const TextDocumentOptions& options,
                                  const TextReadOptions& read = {});

// True for the byte tokenizer (ids are the text's bytes).
bool is_byte_tokenizer(const Tokenizer& tok);

}  // namespace eq::tokenizer

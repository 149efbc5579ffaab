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
  // not encoded; the last one kept is cut).
  int64_t max_tokens = 0;
};

struct TextDocuments {
  std::vector<std::vector<int32_t>> documents;  // empty documents left out
  uint64_t xxh64 = 0;                           // of the text read (decompressed)
  int64_t total() const;
};

// Encodes `text` by documents.
std::vector<std::vector<int32_t>> encode_documents(std::string_view text, const Tokenizer& tok,
                                                   const TextDocumentOptions& options);

// Reads `path` (.zst decompressed) and encodes it by documents. The byte
// tokenizer with max_tokens and no separator reads only the bytes it keeps,
// so the start of a corpus of any size costs only that start.
TextDocuments read_text_documents(const std::string& path, const Tokenizer& tok, const TextDocumentOptions& options);

// True for the byte tokenizer (ids are the text's bytes).
bool is_byte_tokenizer(const Tokenizer& tok);

}  // namespace eq::tokenizer

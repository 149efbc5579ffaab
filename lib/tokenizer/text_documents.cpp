#include "tokenizer/text_documents.h"

#include <algorithm>

#include "core/hash.h"
#include "core/thread_pool.h"
#include "io/text_file.h"

namespace eq::tokenizer {

namespace {

std::vector<std::string_view> split_documents(std::string_view text, const std::string& separator) {
  std::vector<std::string_view> docs;
  if (separator.empty()) {
    if (!text.empty()) docs.push_back(text);
    return docs;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(separator, at), text.size());
    if (end > at) docs.push_back(text.substr(at, end - at));
    at = end + separator.size();
  }
  return docs;
}

// Documents encoded a batch at a time on the pool: with max_tokens, encoding
// stops at the first batch that reaches it rather than after the whole file.
constexpr size_t kDocumentsPerBatch = 64;
// From this size a document's own words are spread over the pool.
constexpr size_t kLongDocumentBytes = size_t{1} << 20;

}  // namespace

int64_t TextDocuments::total() const {
  int64_t n = 0;
  for (const auto& d : documents) n += static_cast<int64_t>(d.size());
  return n;
}

bool is_byte_tokenizer(const Tokenizer& tok) { return tok.source() == "bytes"; }

std::vector<std::vector<int32_t>> encode_documents(std::string_view text, const Tokenizer& tok,
                                                   const TextDocumentOptions& options) {
  const std::vector<std::string_view> docs = split_documents(text, options.separator);
  std::vector<std::vector<int32_t>> out;
  int64_t total = 0;
  // Keeps a batch's documents in order; true once max_tokens is reached.
  const auto keep = [&](std::vector<std::vector<int32_t>>& batch) {
    for (auto& d : batch) {
      if (options.max_tokens > 0 && total + static_cast<int64_t>(d.size()) > options.max_tokens)
        d.resize(static_cast<size_t>(options.max_tokens - total));
      total += static_cast<int64_t>(d.size());
      if (!d.empty()) out.push_back(std::move(d));
      if (options.max_tokens > 0 && total == options.max_tokens) return true;
    }
    return false;
  };
  for (size_t b = 0; b < docs.size();) {
    // A long document is one batch, its words encoded on the pool; short ones
    // go kDocumentsPerBatch at a time, one per pool thread.
    if (docs[b].size() >= kLongDocumentBytes) {
      std::vector<std::vector<int32_t>> one(1);
      one[0] = tok.encode_parallel(docs[b], /*add_special=*/true, default_pool());
      if (keep(one)) return out;
      ++b;
      continue;
    }
    size_t n = 0;
    while (n < kDocumentsPerBatch && b + n < docs.size() && docs[b + n].size() < kLongDocumentBytes) ++n;
    std::vector<std::vector<int32_t>> batch(n);
    default_pool().run(n, [&](size_t i) { batch[i] = tok.encode(docs[b + i], /*add_special=*/true); });
    if (keep(batch)) return out;
    b += n;
  }
  return out;
}

TextDocuments read_text_documents(const std::string& path, const Tokenizer& tok, const TextDocumentOptions& options) {
  // One byte is one token: the first max_tokens bytes are all that is used.
  const bool prefix = is_byte_tokenizer(tok) && options.separator.empty() && options.max_tokens > 0;
  const std::string text = io::read_text_prefix(path, prefix ? static_cast<uint64_t>(options.max_tokens) : 0);
  TextDocuments out;
  out.xxh64 = xxhash64(text);
  out.documents = encode_documents(text, tok, options);
  return out;
}

}  // namespace eq::tokenizer

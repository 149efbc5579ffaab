#include "tokenizer/text_documents.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
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

namespace {

// Encodes documents in order into `out`, counting `total`; true once
// max_tokens is reached (documents after it are not encoded).
class DocumentEncoder {
 public:
  DocumentEncoder(const Tokenizer& tok, const TextDocumentOptions& options) : tok_(tok), options_(options) {}

  bool add(const std::vector<std::string_view>& docs) {
    for (size_t b = 0; b < docs.size();) {
      // A long document is one batch, its words encoded on the pool; short ones
      // go kDocumentsPerBatch at a time, one per pool thread.
      if (docs[b].size() >= kLongDocumentBytes) {
        std::vector<std::vector<int32_t>> one(1);
        one[0] = tok_.encode_parallel(docs[b], /*add_special=*/true, default_pool());
        if (keep(one)) return true;
        ++b;
        continue;
      }
      size_t n = 0;
      while (n < kDocumentsPerBatch && b + n < docs.size() && docs[b + n].size() < kLongDocumentBytes) ++n;
      std::vector<std::vector<int32_t>> batch(n);
      default_pool().run(n, [&](size_t i) { batch[i] = tok_.encode(docs[b + i], /*add_special=*/true); });
      if (keep(batch)) return true;
      b += n;
    }
    return false;
  }
  int64_t total() const { return total_; }
  std::vector<std::vector<int32_t>> take() { return std::move(out_); }

 private:
  // Keeps a batch's documents in order; true once max_tokens is reached.
  bool keep(std::vector<std::vector<int32_t>>& batch) {
    for (auto& d : batch) {
      if (options_.max_tokens > 0 && total_ + static_cast<int64_t>(d.size()) > options_.max_tokens)
        d.resize(static_cast<size_t>(options_.max_tokens - total_));
      total_ += static_cast<int64_t>(d.size());
      if (!d.empty()) out_.push_back(std::move(d));
      if (options_.max_tokens > 0 && total_ == options_.max_tokens) return true;
    }
    return false;
  }

  const Tokenizer& tok_;
  const TextDocumentOptions& options_;
  std::vector<std::vector<int32_t>> out_;
  int64_t total_ = 0;
};

constexpr size_t kReadChunk = size_t{1} << 20;

// kResource: document `index` (1-based) of `path` is longer than `limit`.
[[noreturn]] void document_too_long(const std::string& path, uint64_t index, size_t limit) {
  fail(ErrorKind::kResource, path + ": document " + std::to_string(index) + " is longer than " +
                                 std::to_string(limit) +
                                 " bytes, the most one document may hold for a tokenizer.json (end documents with "
                                 "--doc-separator)");
}

}  // namespace

std::vector<std::vector<int32_t>> encode_documents(std::string_view text, const Tokenizer& tok,
                                                   const TextDocumentOptions& options) {
  DocumentEncoder enc(tok, options);
  enc.add(split_documents(text, options.separator));
  return enc.take();
}

TextDocuments read_text_documents(const std::string& path, const Tokenizer& tok, const TextDocumentOptions& options,
                                  const TextReadOptions& read) {
  TextDocuments out;
  const bool bytes = is_byte_tokenizer(tok);
  // One byte is one token: the first max_tokens bytes are all that is used.
  if (bytes && options.separator.empty() && options.max_tokens > 0) {
    const std::string text = io::read_text_prefix(path, static_cast<uint64_t>(options.max_tokens));
    out.xxh64 = xxhash64(text);
    out.documents = encode_documents(text, tok, options);
    return out;
  }
  // All of it is wanted: its size is known (declared, or counted without
  // keeping it) before any of it is encoded.
  if (options.max_tokens <= 0 && io::text_content_size(path, io::kMaxTextBytes) > io::kMaxTextBytes)
    fail(ErrorKind::kResource, path + ": text larger than the limit of " + std::to_string(io::kMaxTextBytes) +
                                   " bytes" + read.too_large_advice);
  // The byte tokenizer's documents are bounded by the text (above) or cut at
  // max_tokens; a tokenizer.json's by kMaxDocumentBytes.
  const size_t max_document = bytes ? SIZE_MAX : kMaxDocumentBytes;
  io::TextReader in(path);
  DocumentEncoder enc(tok, options);
  const std::string& sep = options.separator;
  std::string pending;    // text read and not yet encoded: the start of a document, or several
  uint64_t document = 1;  // the number of the document pending starts
  bool done = false, eof = false;
  while (!done && !eof) {
    const size_t old = pending.size();
    eof = in.read(pending, kReadChunk) == 0;
    in.hash().update(pending.data() + old, pending.size() - old);
    // The documents pending completes (all of it at the end of the file).
    std::vector<std::string_view> docs;
    size_t consumed = 0;
    if (!sep.empty()) {
      size_t from = old >= sep.size() ? old - sep.size() + 1 : 0;
      for (size_t at = pending.find(sep, from); at != std::string::npos; at = pending.find(sep, consumed)) {
        if (at - consumed > max_document) document_too_long(path, document, max_document);
        if (at > consumed) docs.emplace_back(std::string_view(pending).substr(consumed, at - consumed));
        consumed = at + sep.size();
        ++document;
      }
    }
    if (eof) {
      if (pending.size() > consumed) docs.emplace_back(std::string_view(pending).substr(consumed));
      consumed = pending.size();
    }
    if (pending.size() - consumed > max_document) document_too_long(path, document, max_document);
    // The byte tokenizer under max_tokens: a document that already holds the
    // tokens still wanted is cut there rather than read to its end.
    if (bytes && options.max_tokens > 0 && docs.empty() &&
        pending.size() - consumed >= static_cast<uint64_t>(options.max_tokens - enc.total())) {
      docs.emplace_back(std::string_view(pending).substr(consumed));
      consumed = pending.size();
    }
    done = enc.add(docs);
    pending.erase(0, consumed);
  }
  if (eof) out.xxh64 = in.hash().digest();
  else if (read.hash_whole_text) out.xxh64 = in.hash_rest(nullptr);
  out.documents = enc.take();
  return out;
}

}  // namespace eq::tokenizer

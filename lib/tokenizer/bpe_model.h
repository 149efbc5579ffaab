// The BPE model of tokenizer.json ("model": {"type": "BPE"}): each word starts
// as one token per character and adjacent pairs are merged lowest merge rank
// first (leftmost among equal ranks) until no listed merge applies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/component.h"
#include "tokenizer/vocab.h"

namespace eq::tokenizer {

class BpeModel {
 public:
  // Reads model.vocab, model.merges (as "a b" strings or [a, b] pairs) and the
  // options; refuses any other model type (exit 4) and malformed fields (exit 2).
  explicit BpeModel(const JsonNode& model);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void load_vocab(const JsonNode& vocab);
  void load_merges(const JsonNode& merges);
  // One symbol per character (or byte-fallback byte / unknown run).
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
  };
  void initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void merge_all(std::vector<Symbol>& symbols) const;

  Vocab vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xXX> tokens for byte_fallback, -1 when absent
};

}  // namespace eq::tokenizer

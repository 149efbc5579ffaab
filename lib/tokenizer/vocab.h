// Token strings and ids in both directions, looked up by string_view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace eq::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Ids above this are refused as malformed: real vocabularies stay below 2^19,
// and tables indexed by id stay a few tens of MB for any file that loads.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 21) - 1;

// Loading a tokenizer looks up three tokens per merge (several hundred
// thousand merges) and encoding one per character, so the string -> id side is
// an open-addressing table of ids (with 32 bits of each token's hash beside
// it) over the id -> string vector, not a node-based map.
class Vocab {
 public:
  std::optional<int32_t> id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
    return &tokens_[id];
  }
  // One more than the largest id.
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // False when the token or the id is taken already.
  bool add(std::string_view token, int32_t id);
  size_t count() const { return count_; }
  void reserve(size_t n);

 private:
  struct Slot {
    uint32_t hash_high = 0;
    int32_t id = -1;  // -1: empty
  };
  static uint64_t hash(std::string_view s);
  // The slot holding `token`, or the empty slot where it would go.
  size_t find_slot(std::string_view token, uint64_t h) const;
  void rehash(size_t slots);

  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  std::vector<Slot> slots_;  // size a power of two, at most half full
  size_t count_ = 0;
};

}  // namespace eq::tokenizer

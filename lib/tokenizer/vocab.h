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

class Vocab {
 public:
  std::optional<int32_t> id(std::string_view token) const {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  // Empty optional when no token has this id.
  const std::string* token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
    return &tokens_[id];
  }
  // One more than the largest id.
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // False when the token or the id is taken already.
  bool add(const std::string& token, int32_t id);
  size_t count() const { return ids_.size(); }
  void reserve(size_t n) {
    ids_.reserve(n);
    tokens_.reserve(n);
    present_.reserve(n);
  }

 private:
  TokenMap ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

}  // namespace eq::tokenizer

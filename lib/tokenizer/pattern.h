// The "pattern" of Split, Replace: {"String": literal} or {"Regex": pattern}.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/component.h"
#include "tokenizer/regex.h"

namespace eq::tokenizer {

class Pattern {
 public:
  explicit Pattern(const JsonNode& node);
  // Non-overlapping matches as [begin, end) byte offsets, left to right.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;
  // `text` with every match replaced by `with`; a result longer than
  // `max_bytes` is refused (kResource) naming this pattern's field.
  std::string replace_all(std::string_view text, std::string_view with, size_t max_bytes) const;

 private:
  std::string label_;  // the pattern's file and field
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace eq::tokenizer

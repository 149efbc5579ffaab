// How a pre-tokenizer turns the matches of its pattern into pieces: the
// "behavior" of Split (and the fixed choice of Digits, Punctuation, ...).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_node.h"

namespace eq::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous".
SplitBehavior parse_split_behavior(const JsonNode& node);

// Appends to `out` the non-empty pieces of `text` cut at `matches`
// (non-overlapping [begin, end) ranges, ascending), `invert` swapping the
// roles of matched and unmatched stretches.
void split_at_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::string>& out);

// Matches of single characters for which `pred` holds, one match each.
template <class Pred>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Pred pred);

}  // namespace eq::tokenizer

#include "tokenizer/utf8.h"

namespace eq::tokenizer {
template <class Pred>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Pred pred) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence_length(text, i);
    if (n == 0) n = 1;
    if (pred(utf8_decode_at(text, i, n))) out.emplace_back(i, i + n);
    i += n;
  }
  return out;
}
}  // namespace eq::tokenizer

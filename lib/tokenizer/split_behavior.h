// How a pre-tokenizer turns the matches of its pattern into pieces: the
// "behavior" of Split (and the fixed choice of Digits, Punctuation, ...).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/component.h"

namespace eq::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous".
SplitBehavior parse_split_behavior(const JsonNode& node);

// Receives the pieces of a text in order; at_text_start: the piece begins the
// whole input. The view is valid only during the call.
using PieceSink = std::function<void(std::string_view piece, bool at_text_start)>;

// Cuts `text` at the matches it is given one by one (non-overlapping
// [begin, end) ranges, ascending) and hands the non-empty pieces to `emit` as
// soon as the behaviour settles them: at most one piece is held back, so a
// text of any size is split in constant memory. `invert` swaps the roles of
// matched and unmatched stretches.
class PieceSplitter {
 public:
  PieceSplitter(std::string_view text, SplitBehavior behavior, bool invert, bool at_text_start, const PieceSink& emit)
      : text_(text), behavior_(behavior), invert_(invert), at_text_start_(at_text_start), emit_(emit) {}
  void match(size_t begin, size_t end);
  // Call once after the last match.
  void finish();

 private:
  struct Span {
    size_t begin, end;
    bool match;
  };
  void span(Span s);
  void hold(Span s);
  void emit(size_t begin, size_t end, bool is_match);

  std::string_view text_;
  SplitBehavior behavior_;
  bool invert_, at_text_start_;
  const PieceSink& emit_;
  size_t prev_end_ = 0;
  bool held_ = false;
  Span hold_{0, 0, false};
  bool previous_match_ = false;
};

// All pieces of `text` cut at `matches` (the vector form of PieceSplitter).
void split_at_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::string>& out);

// Calls on_match(begin, end) for each character for which `pred` holds.
template <class Pred, class F>
void for_each_char_match(std::string_view text, Pred pred, F on_match);

}  // namespace eq::tokenizer

#include "core/utf8.h"

namespace eq::tokenizer {
template <class Pred, class F>
void for_each_char_match(std::string_view text, Pred pred, F on_match) {
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence_length(text, i);
    if (n == 0) n = 1;
    if (pred(utf8_decode_at(text, i, n))) on_match(i, i + n);
    i += n;
  }
}
}  // namespace eq::tokenizer

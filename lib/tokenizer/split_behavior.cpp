#include "tokenizer/split_behavior.h"

namespace eq::tokenizer {

SplitBehavior parse_split_behavior(const JsonNode& node) {
  const std::string s = node.str();
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  node.invalid("expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous, found \"" + s + "\"");
}

void PieceSplitter::match(size_t begin, size_t end) {
  if (prev_end_ != begin) span({prev_end_, begin, invert_});
  span({begin, end, !invert_});
  prev_end_ = end;
}

void PieceSplitter::finish() {
  if (prev_end_ != text_.size()) span({prev_end_, text_.size(), invert_});
  if (held_) emit(hold_.begin, hold_.end, hold_.match);
  held_ = false;
}

void PieceSplitter::emit(size_t begin, size_t end, bool is_match) {
  if (begin == end) return;
  if (behavior_ == SplitBehavior::kRemoved && is_match) return;
  emit_(text_.substr(begin, end - begin), at_text_start_ && begin == 0);
}

// The text arrives as alternating unmatched / matched spans. Each behaviour
// decides a piece from the span held back and the one arriving.
// Emits the piece held so far (if any) and holds `s` in its place.
void PieceSplitter::hold(Span s) {
  if (held_) emit(hold_.begin, hold_.end, false);
  hold_ = s;
  held_ = true;
}

void PieceSplitter::span(Span s) {
  switch (behavior_) {
    case SplitBehavior::kIsolated:
    case SplitBehavior::kRemoved:
      emit(s.begin, s.end, s.match);
      return;
    case SplitBehavior::kContiguous:          // consecutive spans of one kind form one piece
    case SplitBehavior::kMergedWithPrevious: {  // a match joins the unmatched piece before it
      const bool joins = behavior_ == SplitBehavior::kContiguous ? s.match == previous_match_
                                                                 : s.match && !previous_match_;
      if (held_ && joins)
        hold_.end = s.end;
      else
        hold(s);
      previous_match_ = s.match;
      return;
    }
    case SplitBehavior::kMergedWithNext:  // a match joins the unmatched piece after it
      if (held_ && hold_.match && !s.match) {
        emit(hold_.begin, s.end, false);
        held_ = false;
      } else {
        hold(s);
      }
      return;
  }
}

void split_at_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::string>& out) {
  const PieceSink sink = [&](std::string_view piece, bool) { out.emplace_back(piece); };
  PieceSplitter splitter(text, behavior, invert, false, sink);
  for (auto [b, e] : matches) splitter.match(b, e);
  splitter.finish();
}

}  // namespace eq::tokenizer

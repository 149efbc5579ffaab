#include "tokenizer/split_behavior.h"

#include <algorithm>

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

namespace {
struct Span {
  size_t begin, end;
  bool match;
};
}  // namespace

void split_at_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::string>& out) {
  // The whole text as alternating unmatched / matched spans.
  std::vector<Span> spans;
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});

  std::vector<Span> pieces;
  pieces.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
    case SplitBehavior::kRemoved:
      pieces = spans;
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !pieces.empty()) pieces.back().end = s.end;
        else pieces.push_back(s);
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !pieces.empty()) pieces.back().end = s.end;
        else pieces.push_back(s);
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !pieces.empty()) pieces.back().begin = it->begin;
        else pieces.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  for (const Span& p : pieces) {
    if (p.begin == p.end) continue;
    if (behavior == SplitBehavior::kRemoved && p.match) continue;
    out.emplace_back(text.substr(p.begin, p.end - p.begin));
  }
}

}  // namespace eq::tokenizer

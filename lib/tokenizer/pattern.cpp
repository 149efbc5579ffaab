#include "tokenizer/pattern.h"

#include <algorithm>

namespace eq::tokenizer {

Pattern::Pattern(const JsonNode& node) : label_(component_label(node)) {
  node.require_object();
  // The reference reads one of the two; which one it would pick is not ours to guess.
  if (node.find("String") && node.find("Regex")) node.invalid("expected {\"String\": ...} or {\"Regex\": ...}, found both");
  if (auto s = node.find("String")) {
    literal_ = s->str();
    if (literal_.empty()) s->invalid("expected a non-empty string");
  } else if (auto r = node.find("Regex")) {
    regex_ = std::make_unique<Regex>(r->str(), r->file() + ": " + r->path());
  } else {
    node.invalid("expected {\"String\": ...} or {\"Regex\": ...}");
  }
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  for_each_match(text, [&](size_t b, size_t e) { out.emplace_back(b, e); });
  return out;
}

void Pattern::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  if (regex_) return regex_->for_each_match(text, on_match);
  for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
    on_match(at, at + literal_.size());
}

std::string Pattern::replace_all(std::string_view text, std::string_view with, size_t max_bytes) const {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t prev = 0;
  // Checked before each append: what is held never passes max_bytes.
  const auto append = [&](std::string_view part) {
    if (part.size() > max_bytes - out.size()) component_too_large(label_, out.size() + part.size(), max_bytes);
    out.append(part);
  };
  for_each_match(text, [&](size_t b, size_t e) {
    append(text.substr(prev, b - prev));
    append(with);
    prev = e;
  });
  append(text.substr(prev));
  return out;
}

}  // namespace eq::tokenizer

#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/split_behavior.h"
#include "tokenizer/unicode.h"

namespace eq::tokenizer {

namespace {

// The pattern GPT-2 style byte-level tokenizers split words with when
// ByteLevel.use_regex is set.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies `split_one` to every piece, in order.
template <class F>
void for_each_piece(std::vector<std::string>& pieces, F split_one) {
  std::vector<std::string> out;
  out.reserve(pieces.size() * 2);
  for (size_t i = 0; i < pieces.size(); ++i) split_one(pieces[i], i, out);
  pieces.swap(out);
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces, at_text_start);
  }
  bool byte_level() const override {
    for (const auto& p : parts_)
      if (p->byte_level()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const JsonNode& pattern, SplitBehavior behavior, bool invert)
      : pattern_(pattern), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    for_each_piece(pieces, [&](const std::string& p, size_t, std::vector<std::string>& out) {
      split_at_matches(p, pattern_.find_all(p), behavior_, invert_, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern, "ByteLevel pre-tokenizer");
  }
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> words;
    for_each_piece(pieces, [&](const std::string& p, size_t, std::vector<std::string>& out) {
      std::string text = p;
      if (add_prefix_space_ && (text.empty() || text[0] != ' ')) text.insert(0, " ");
      words.clear();
      if (regex_) split_at_matches(text, regex_->find_all(text), SplitBehavior::kIsolated, false, words);
      else if (!text.empty()) words.push_back(text);
      for (const std::string& w : words) {
        std::string mapped;
        mapped.reserve(w.size() * 2);
        byte_level_encode(w, mapped);
        out.push_back(std::move(mapped));
      }
    });
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const override {
    for_each_piece(pieces, [&](const std::string& p, size_t i, std::vector<std::string>& out) {
      std::string text;
      text.reserve(p.size() + replacement_.size());
      for (char c : p) {
        if (c == ' ') text += replacement_;
        else text += c;
      }
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && at_text_start && i == 0)))
        text.insert(0, replacement_);
      if (!split_) {
        if (!text.empty()) out.push_back(std::move(text));
        return;
      }
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t at = text.find(replacement_); at != std::string::npos; at = text.find(replacement_, at + replacement_.size()))
        matches.emplace_back(at, at + replacement_.size());
      split_at_matches(text, matches, SplitBehavior::kMergedWithNext, false, out);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Pieces cut where a character class holds (Digits, Punctuation, WhitespaceSplit).
template <class Pred>
class CharClassPreTokenizer : public PreTokenizer {
 public:
  CharClassPreTokenizer(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    for_each_piece(pieces, [&](const std::string& p, size_t, std::vector<std::string>& out) {
      split_at_matches(p, char_matches(p, pred_), behavior_, false, out);
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> char_class(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharClassPreTokenizer<Pred>>(pred, behavior);
}

// Words of \w characters and runs of other non-space characters; spaces dropped.
class WhitespacePreTokenizer : public PreTokenizer {
 public:
  WhitespacePreTokenizer() : regex_(R"(\w+|[^\w\s]+)", "Whitespace pre-tokenizer") {}
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    for_each_piece(pieces, [&](const std::string& p, size_t, std::vector<std::string>& out) {
      split_at_matches(p, regex_.find_all(p), SplitBehavior::kRemoved, true, out);
    });
  }

 private:
  Regex regex_;
};

PrependScheme metaspace_scheme(const JsonNode& node) {
  if (auto s = node.find("prepend_scheme")) {
    const std::string v = s->str();
    if (v == "always") return PrependScheme::kAlways;
    if (v == "first") return PrependScheme::kFirst;
    if (v == "never") return PrependScheme::kNever;
    s->invalid("expected always, first or never, found \"" + v + "\"");
  }
  return node.bool_or("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence") {
    const JsonNode list = node.at("pretokenizers");
    list.require_array();
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.value().size(); ++i)
      if (auto p = make_pre_tokenizer(list.index(i))) parts.push_back(std::move(p));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split")
    return std::make_unique<SplitPreTokenizer>(node.at("pattern"), parse_split_behavior(node.at("behavior")),
                                               node.bool_or("invert", false));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(node.bool_or("add_prefix_space", true), node.bool_or("use_regex", true));
  if (type == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(node.str_or("replacement", "\xE2\x96\x81"), metaspace_scheme(node),
                                                   node.bool_or("split", true));
  if (type == "Digits")
    return char_class(is_numeric, node.bool_or("individual_digits", false) ? SplitBehavior::kIsolated
                                                                            : SplitBehavior::kContiguous);
  if (type == "Punctuation") {
    auto b = node.find("behavior");
    return char_class(is_punctuation, b ? parse_split_behavior(*b) : SplitBehavior::kIsolated);
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") return char_class(is_whitespace, SplitBehavior::kRemoved);
  node.unsupported("pre-tokenizer", type);
}

}  // namespace eq::tokenizer

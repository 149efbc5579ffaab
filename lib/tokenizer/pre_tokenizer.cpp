#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace eq::tokenizer {

std::vector<std::string> PreTokenizer::pieces(std::string_view text, bool at_text_start) const {
  std::vector<std::string> out;
  split(text, at_text_start, [&](std::string_view p, bool) { out.emplace_back(p); });
  return out;
}

namespace {

// The pattern GPT-2 style byte-level tokenizers split words with when
// ByteLevel.use_regex is set.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    run(0, text, at_text_start, emit);
  }

 private:
  void run(size_t stage, std::string_view text, bool at_text_start, const PieceSink& emit) const {
    if (stage == parts_.size()) return emit(text, at_text_start);
    parts_[stage]->split(text, at_text_start,
                         [&](std::string_view piece, bool at_start) { run(stage + 1, piece, at_start, emit); });
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const JsonNode& pattern, SplitBehavior behavior, bool invert)
      : pattern_(pattern), behavior_(behavior), invert_(invert) {}
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    PieceSplitter splitter(text, behavior_, invert_, at_text_start, emit);
    pattern_.for_each_match(text, [&](size_t b, size_t e) { splitter.match(b, e); });
    splitter.finish();
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
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    std::string prefixed;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      prefixed = " ";
      prefixed.append(text);
      text = prefixed;
    }
    std::string mapped;
    const PieceSink map_and_emit = [&](std::string_view word, bool at_start) {
      mapped.clear();
      byte_level_encode(word, mapped);
      emit(mapped, at_start);
    };
    if (!regex_) {
      if (!text.empty()) map_and_emit(text, at_text_start);
      return;
    }
    PieceSplitter splitter(text, SplitBehavior::kIsolated, false, at_text_start, map_and_emit);
    regex_->for_each_match(text, [&](size_t b, size_t e) { splitter.match(b, e); });
    splitter.finish();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void split(std::string_view piece, bool at_text_start, const PieceSink& emit) const override {
    std::string text;
    text.reserve(piece.size() + replacement_.size());
    for (char c : piece) {
      if (c == ' ') text += replacement_;
      else text += c;
    }
    const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && at_text_start)))
      text.insert(0, replacement_);
    if (!split_) {
      if (!text.empty()) emit(text, at_text_start);
      return;
    }
    PieceSplitter splitter(text, SplitBehavior::kMergedWithNext, false, at_text_start, emit);
    for (size_t at = text.find(replacement_); at != std::string::npos; at = text.find(replacement_, at + replacement_.size()))
      splitter.match(at, at + replacement_.size());
    splitter.finish();
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
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    PieceSplitter splitter(text, behavior_, false, at_text_start, emit);
    for_each_char_match(text, pred_, [&](size_t b, size_t e) { splitter.match(b, e); });
    splitter.finish();
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
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    PieceSplitter splitter(text, SplitBehavior::kRemoved, true, at_text_start, emit);
    regex_.for_each_match(text, [&](size_t b, size_t e) { splitter.match(b, e); });
    splitter.finish();
  }

 private:
  Regex regex_;
};

std::string metaspace_replacement(const JsonNode& node) {
  auto r = node.find("replacement");
  return r ? r->one_char() : "\xE2\x96\x81";
}

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
  if (type == "Sequence") return std::make_unique<SequencePreTokenizer>(sequence_of(node, "pretokenizers", make_pre_tokenizer));
  if (type == "Split")
    return std::make_unique<SplitPreTokenizer>(node.at("pattern"), parse_split_behavior(node.at("behavior")),
                                               node.bool_or("invert", false));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(node.bool_or("add_prefix_space", true), node.bool_or("use_regex", true));
  if (type == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(metaspace_replacement(node), metaspace_scheme(node),
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
  refuse_component(node, "pre-tokenizer", type);
}

}  // namespace eq::tokenizer

#include "tokenizer/pre_tokenizer.h"

#include <deque>
#include <utility>

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

// Each piece of one stage goes through the later stages before the next
// piece is cut, in a loop over an explicit stack rather than one call frame
// per stage: any number of stages costs no stack. levels[k] holds the pieces
// stage k + 1 cut from the piece of the level above it being worked on (the
// first stage hands its pieces on as it finds them, the last emits them), so
// memory is one piece's descendants per stage; the bytes held at once are
// bounded by kMaxComponentBytes.
class SequencePreTokenizer : public PreTokenizer {
 public:
  SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts, std::string label)
      : parts_(std::move(parts)), label_(std::move(label)) {}
  void split(std::string_view text, bool at_text_start, const PieceSink& emit) const override {
    if (parts_.empty()) return emit(text, at_text_start);
    if (parts_.size() == 1) return parts_[0]->split(text, at_text_start, emit);
    std::deque<Level> levels;  // a deque: a level's pieces stay put while deeper levels are added
    size_t held = 0;
    parts_[0]->split(text, at_text_start, [&](std::string_view piece, bool at_start) {
      later_stages(piece, at_start, levels, held, emit);
    });
  }

 private:
  struct Level {
    std::string bytes;                           // the pieces, one after the other
    std::vector<std::pair<size_t, bool>> ends;   // each piece's end in `bytes`, and at_text_start
    size_t next = 0;                             // the next piece to take down
    std::string_view piece(size_t i) const {
      const size_t b = i == 0 ? 0 : ends[i - 1].first;
      return std::string_view(bytes).substr(b, ends[i].first - b);
    }
    // Empties the level; the buffers of a long piece are given back, so
    // levels that are not in use hold at most kKeptBytes each.
    void clear(size_t& held) {
      held -= bytes.size();
      bytes.clear();
      ends.clear();
      if (bytes.capacity() > kKeptBytes) std::string().swap(bytes);
      if (ends.capacity() * sizeof(ends[0]) > kKeptBytes) decltype(ends)().swap(ends);
      next = 0;
    }
    static constexpr size_t kKeptBytes = 1024;
  };

  // Stages 1.. on one piece of stage 0.
  void later_stages(std::string_view piece, bool at_start, std::deque<Level>& levels, size_t& held,
                    const PieceSink& emit) const {
    const size_t last = parts_.size() - 1;
    // Runs stage `stage` on `in`: the last stage emits, any other fills levels[stage - 1].
    const auto run = [&](size_t stage, std::string_view in, bool in_start) {
      if (stage == last) return parts_[stage]->split(in, in_start, emit);
      while (levels.size() < stage) levels.emplace_back();
      Level& out = levels[stage - 1];
      out.clear(held);
      parts_[stage]->split(in, in_start, [&](std::string_view p, bool s) {
        held += p.size();
        if (held > kMaxComponentBytes) component_too_large(label_, held, kMaxComponentBytes);
        out.bytes.append(p);
        out.ends.emplace_back(out.bytes.size(), s);
      });
    };
    run(1, piece, at_start);
    if (last == 1) return;
    size_t depth = 1;  // the stage whose pieces levels[depth - 1] holds
    while (depth > 0) {
      Level& level = levels[depth - 1];
      if (level.next == level.ends.size()) {
        level.clear(held);
        --depth;
        continue;
      }
      const size_t i = level.next++;
      run(depth + 1, level.piece(i), level.ends[i].second);
      if (depth + 1 < last) ++depth;
    }
  }

  std::vector<std::unique_ptr<PreTokenizer>> parts_;
  std::string label_;
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
  if (type == "Sequence")
    return std::make_unique<SequencePreTokenizer>(sequence_of(node, "pretokenizers", make_pre_tokenizer),
                                                  component_label(node));
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

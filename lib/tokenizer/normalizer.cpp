#include "tokenizer/normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"
#include "core/utf8.h"

namespace eq::tokenizer {

namespace {

// Stages one after the other in a loop: any number of them costs no stack.
class SequenceNormalizer : public Normalizer {
 public:
  SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts, std::vector<std::string> labels)
      : parts_(std::move(parts)), labels_(std::move(labels)) {}
  void normalize(std::string& text, size_t max_bytes) const override {
    for (size_t i = 0; i < parts_.size(); ++i) {
      parts_[i]->normalize(text, max_bytes);
      if (text.size() > max_bytes) component_too_large(labels_[i], text.size(), max_bytes);
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
  std::vector<std::string> labels_;  // of each part
};

// Unicode normalization forms through utf8proc (maintained tables, not ours).
// Code points below `stable_below` are left unchanged by the form and nothing
// combines across them (canonical combining class 0, quick check Yes: U+0300
// for NFC, ASCII for the others), so the text is cut before each of them and
// only stretches holding a higher code point go through utf8proc: prose and
// code are mostly ASCII, and normalizing them whole would dominate encoding.
class FormNormalizer : public Normalizer {
 public:
  FormNormalizer(utf8proc_option_t options, char32_t stable_below) : options_(options), stable_below_(stable_below) {}
  void normalize(std::string& text, size_t /*max_bytes*/) const override {
    std::string out;
    size_t flushed = 0;       // text[0, flushed) is in `out` already (when `changed`)
    size_t last_stable = 0;   // start of the latest stable code point
    bool changed = false;
    for (size_t i = 0; i < text.size();) {
      size_t n = utf8_sequence_length(text, i);
      if (n == 0) n = 1;
      if (utf8_decode_at(text, i, n) < stable_below_) {
        last_stable = i;
        i += n;
        continue;
      }
      // An unstable stretch: from the stable code point before it to the next stable one.
      const size_t begin = std::max(flushed, last_stable);
      size_t end = i + n;
      while (end < text.size()) {
        size_t m = utf8_sequence_length(text, end);
        if (m == 0) m = 1;
        if (utf8_decode_at(text, end, m) < stable_below_) break;
        end += m;
      }
      if (!changed) out.reserve(text.size() + 16);
      changed = true;
      out.append(text, flushed, begin - flushed);
      append_normalized(std::string_view(text).substr(begin, end - begin), out);
      flushed = end;
      last_stable = end;
      i = end;
    }
    if (!changed) return;
    out.append(text, flushed, std::string::npos);
    text.swap(out);
  }

 private:
  void append_normalized(std::string_view s, std::string& out) const {
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &mapped, options_);
    if (n < 0) eq::invalid(std::string("text cannot be normalized: ") + utf8proc_errmsg(n));
    out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
  }

  utf8proc_option_t options_;
  char32_t stable_below_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void normalize(std::string& text, size_t /*max_bytes*/) const override { text = to_lowercase(text); }
};

class PrependNormalizer : public Normalizer {
 public:
  PrependNormalizer(std::string prefix, std::string label) : prefix_(std::move(prefix)), label_(std::move(label)) {}
  void normalize(std::string& text, size_t max_bytes) const override {
    if (text.empty()) return;
    if (prefix_.size() > max_bytes || text.size() > max_bytes - prefix_.size())
      component_too_large(label_, text.size() + prefix_.size(), max_bytes);
    text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
  std::string label_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const JsonNode& pattern, std::string content) : pattern_(pattern), content_(std::move(content)) {}
  void normalize(std::string& text, size_t max_bytes) const override {
    text = pattern_.replace_all(text, content_, max_bytes);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text, size_t /*max_bytes*/) const override {
    if (right_) text.resize(text.size() - trailing_whitespace_bytes(text));
    if (left_) text.erase(0, leading_whitespace_bytes(text));
  }

 private:
  bool left_, right_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence") {
    const JsonNode list = node.at("normalizers");
    list.require_array();
    std::vector<std::unique_ptr<Normalizer>> parts;
    std::vector<std::string> labels;
    for (size_t i = 0; i < list.value().size(); ++i)
      if (auto p = make_normalizer(list.index(i))) {
        parts.push_back(std::move(p));
        labels.push_back(component_label(list.index(i)));
      }
    return std::make_unique<SequenceNormalizer>(std::move(parts), std::move(labels));
  }
  if (type == "NFC") return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE), 0x300);
  if (type == "NFD") return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), 0x80);
  if (type == "NFKC")
    return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT), 0x80);
  if (type == "NFKD")
    return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), 0x80);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(node.at("prepend").str(), component_label(node));
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(node.at("pattern"), node.at("content").str());
  if (type == "Strip") return std::make_unique<StripNormalizer>(node.bool_or("strip_left", true), node.bool_or("strip_right", true));
  refuse_component(node, "normalizer", type);
}

}  // namespace eq::tokenizer

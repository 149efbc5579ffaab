#include "tokenizer/normalizer.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace eq::tokenizer {

namespace {

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// Unicode normalization forms through utf8proc (maintained tables, not ours).
class FormNormalizer : public Normalizer {
 public:
  explicit FormNormalizer(utf8proc_option_t options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (text.empty()) return;
    // ASCII is unchanged by every normalization form.
    bool ascii = true;
    for (unsigned char c : text) ascii &= c < 0x80;
    if (ascii) return;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out, options_);
    if (n < 0) eq::invalid(std::string("text cannot be normalized: ") + utf8proc_errmsg(n));
    text.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }

 private:
  utf8proc_option_t options_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = to_lowercase(text); }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const JsonNode& pattern, std::string content) : pattern_(pattern), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
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
    for (size_t i = 0; i < list.value().size(); ++i)
      if (auto p = make_normalizer(list.index(i))) parts.push_back(std::move(p));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC") return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (type == "NFD") return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  if (type == "NFKC")
    return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  if (type == "NFKD")
    return std::make_unique<FormNormalizer>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(node.at("prepend").str());
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(node.at("pattern"), node.at("content").str());
  if (type == "Strip") return std::make_unique<StripNormalizer>(node.bool_or("strip_left", true), node.bool_or("strip_right", true));
  node.unsupported("normalizer", type);
}

}  // namespace eq::tokenizer

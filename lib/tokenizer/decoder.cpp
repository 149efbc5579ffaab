#include "tokenizer/decoder.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "core/utf8.h"

namespace eq::tokenizer {

namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";

// Stages one after the other in a loop: any number of them costs no stack.
class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens, size_t max_bytes) const override {
    for (const auto& p : parts_) p->decode_chain(tokens, max_bytes);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// Characters of the byte-level alphabet back to bytes; a token holding any
// other character is kept as it is. The bytes are then read as UTF-8, invalid
// sequences becoming U+FFFD.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, size_t /*max_bytes*/) const override {
    std::string bytes;
    std::string mapped;
    for (const std::string& t : tokens) {
      mapped.clear();
      bool all = true;
      for (size_t i = 0; i < t.size();) {
        const size_t n = utf8_sequence_length(t, i);
        const auto b = n ? byte_level_byte(utf8_decode_at(t, i, n)) : std::nullopt;
        if (!b) {
          all = false;
          break;
        }
        mapped += static_cast<char>(*b);
        i += n;
      }
      bytes += all ? mapped : t;
    }
    tokens.assign(1, valid_utf8(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, size_t /*max_bytes*/) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t at = 0; at < t.size();) {
        if (t.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          at += replacement_.size();
        } else {
          out += t[at++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// Runs of <0xXX> tokens become the text of their bytes; a run that is not
// UTF-8 becomes one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, size_t /*max_bytes*/) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_len = 0;
    const auto flush = [&] {
      if (run_len == 0) return;
      if (is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k) out.push_back(kReplacementChar);
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = hex_byte(t[3], t[4]);
      if (byte >= 0) {
        run += static_cast<char>(byte);
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, size_t /*max_bytes*/) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, size_t /*max_bytes*/) const override {
    const size_t c = content_.size();
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && e - b >= c && t.compare(b, c, content_) == 0; ++k) b += c;
      for (size_t k = 0; k < stop_ && e - b >= c && t.compare(e - c, c, content_) == 0; ++k) e -= c;
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const JsonNode& pattern, std::string content) : pattern_(pattern), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, size_t max_bytes) const override {
    size_t total = 0;
    for (const std::string& t : tokens) total += t.size();
    for (std::string& t : tokens) {
      // What the other tokens hold now bounds what this one may become.
      total -= t.size();
      t = pattern_.replace_all(t, content_, max_bytes - std::min(total, max_bytes));
      total += t.size();
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

size_t count_field(const JsonNode& node, const char* key) {
  const JsonNode n = node.at(key);
  const int64_t v = n.integer();
  if (v < 0) n.invalid("expected a count >= 0");
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence") return std::make_unique<SequenceDecoder>(sequence_of(node, "decoders", make_decoder));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    bool strip_first = node.bool_or("add_prefix_space", true);
    if (auto s = node.find("prepend_scheme")) strip_first = s->str() != "never";
    auto r = node.find("replacement");
    return std::make_unique<MetaspaceDecoder>(r ? r->one_char() : "\xE2\x96\x81", strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(node.at("content").one_char(), count_field(node, "start"), count_field(node, "stop"));
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(node.at("pattern"), node.at("content").str());
  refuse_component(node, "decoder", type);
}

}  // namespace eq::tokenizer

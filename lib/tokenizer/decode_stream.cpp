#include "tokenizer/decode_stream.h"

#include <string_view>

namespace eq::tokenizer {

namespace {

// Whether `s` ends inside a character: an unfinished UTF-8 sequence, or the
// U+FFFD a decoder puts for one (both change when the next token comes).
bool ends_unfinished(std::string_view s) {
  if (s.ends_with("\xEF\xBF\xBD")) return true;
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) != 0x80) {  // the last sequence's lead byte
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return need > back;
    }
  }
  return false;
}

}  // namespace

std::string DecodeStream::push(int32_t id) {
  ids_.push_back(id);
  text_ = tok_.decode(ids_, /*skip_special=*/false);
  if (ends_unfinished(text_) || !text_.starts_with(released_)) return {};
  return finish();
}

std::string DecodeStream::finish() {
  // Released text cannot be taken back: should the whole text no longer
  // start with it, what lies past its length is released.
  std::string out = text_.size() > released_.size() ? text_.substr(released_.size()) : std::string();
  released_ = text_;
  return out;
}

}  // namespace eq::tokenizer

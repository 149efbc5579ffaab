#include "io/prompt_text.h"

namespace eq::io {
namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string unescape_prompt(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char e = text[i + 1];
    switch (e) {
      case 'n': out += '\n'; ++i; continue;
      case 't': out += '\t'; ++i; continue;
      case 'r': out += '\r'; ++i; continue;
      case '0': out += '\0'; ++i; continue;
      case '\\': out += '\\'; ++i; continue;
      case '"': out += '"'; ++i; continue;
      case '\'': out += '\''; ++i; continue;
      case 'x':
        if (i + 3 < text.size() && hex_value(text[i + 2]) >= 0 && hex_value(text[i + 3]) >= 0) {
          out += static_cast<char>(hex_value(text[i + 2]) * 16 + hex_value(text[i + 3]));
          i += 3;
          continue;
        }
        break;
      default: break;
    }
    out += '\\';  // unknown escape: keep the backslash as typed
  }
  return out;
}

}  // namespace eq::io

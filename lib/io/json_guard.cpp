#include "io/json_guard.h"

#include "core/error.h"

namespace eq::io {

void check_json_depth(std::string_view text, const std::string& label, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth)
        invalid(label + ": JSON nests deeper than " + std::to_string(max_depth) + " levels (at byte " +
                std::to_string(i) + ")");
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace eq::io

#include "core/printf_string.h"

#include <cstdarg>
#include <cstdio>

namespace eq {
namespace {

void append_v(std::string& out, const char* format, va_list args) {
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    // vsnprintf writes n characters and a terminator; the terminator lands on
    // the string's own one past its end.
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, format, again);
  }
  va_end(again);
}

}  // namespace

std::string printed(const char* format, ...) {
  std::string s;
  va_list args;
  va_start(args, format);
  append_v(s, format, args);
  va_end(args);
  return s;
}

void appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  append_v(out, format, args);
  va_end(args);
}

}  // namespace eq

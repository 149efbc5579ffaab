// printf-style formatting into std::string, for the text reports and
// descriptions (tables whose columns are widths and precisions).
#pragma once

#include <string>

namespace eq {

// The formatted text, however long.
std::string printed(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Appends the formatted text to out, however long.
void appendf(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace eq

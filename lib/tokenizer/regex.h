// Unicode regular expressions for Split pre-tokenizers and Replace
// normalizers/decoders: PCRE2 with UTF and UCP (\p{L}, \s and \w by Unicode
// properties), JIT-compiled when the platform allows it. Subjects must be
// valid UTF-8 (the tokenizer repairs its input first).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eq::tokenizer {

class Regex {
 public:
  // Throws eq::Error (exit 2) naming `where` when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as [begin, end) byte offsets. An
  // empty match moves the search on by one character.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;
  // The same matches handed to `on_match(begin, end)` as they are found, so a
  // text of any size is split without holding all its matches.
  void for_each_match(std::string_view subject, const std::function<void(size_t, size_t)>& on_match) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace eq::tokenizer

#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "core/utf8.h"

namespace eq::tokenizer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string where;
};

namespace {
// One match-data block per thread: pcre2_match needs
// one, and allocating it per call would dominate short pieces.
struct MatchData {
  pcre2_match_data* data = nullptr;
  MatchData() { data = pcre2_match_data_create(8, nullptr); }
  ~MatchData() { pcre2_match_data_free(data); }
};
}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : impl_(std::make_unique<Impl>()) {
  impl_->where = where;
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &err, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    eq::invalid(where + ": regular expression does not compile at offset " + std::to_string(offset) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only: without it (no executable memory) matching is the same, slower.
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> out;
  for_each_match(subject, [&](size_t b, size_t e) { out.emplace_back(b, e); });
  return out;
}

void Regex::for_each_match(std::string_view subject, const std::function<void(size_t, size_t)>& on_match) const {
  thread_local MatchData md;
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, md.data, nullptr)
                              : pcre2_match(impl_->code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      eq::fail(ErrorKind::kResource, impl_->where + ": regular expression match failed: " +
                                         reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t b = ov[0], e = ov[1];
    on_match(b, e);
    if (e > b) {
      start = e;
    } else {
      if (e >= subject.size()) break;
      const size_t n = utf8_sequence_length(subject, e);
      start = e + (n == 0 ? 1 : n);
    }
  }
}

}  // namespace eq::tokenizer

// Typed errors thrown by lib/. Every message names what was wrong and where
// (file, tensor, field, position); apps/ maps the kind to an exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace eq {

enum class ErrorKind {
  kInvalidInput = 2,  // malformed file, bad option value, inconsistent model
  kIo = 3,            // open/read/write/rename failures
  kUnsupported = 4,   // valid input we do not handle (unknown model_type, dtype)
  kResource = 5,      // a memory or size limit would be exceeded
  kInternal = 70,     // a bug: an invariant of our own code did not hold
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) { throw Error(kind, message); }
[[noreturn]] inline void invalid(const std::string& message) { fail(ErrorKind::kInvalidInput, message); }
[[noreturn]] inline void unsupported(const std::string& message) { fail(ErrorKind::kUnsupported, message); }

// Checked helper for our own invariants (not for user input).
#define EQ_CHECK(cond, msg)                                                                 \
  do {                                                                                      \
    if (!(cond)) ::eq::fail(::eq::ErrorKind::kInternal, std::string(__FILE__ ":") +         \
                                                            std::to_string(__LINE__) + ": " + (msg)); \
  } while (0)

}  // namespace eq

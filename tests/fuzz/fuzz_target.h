// One fuzz target = one function of the input bytes, declared with
// EQ_FUZZ_TARGET(name) in tests/fuzz/fuzz_<name>.cpp. Built two ways:
//   - with EQ_LIBFUZZER (CMake option EQ_FUZZ, clang): the function becomes
//     LLVMFuzzerTestOneInput of the executable fuzz_<name>;
//   - otherwise (the ordinary test_fuzz GoogleTest binary, any compiler): the
//     function is registered by name, and corpus_replay_test.cpp runs every
//     file of tests/fuzz/corpus/<name>/ through it, so seeds and the
//     reproducers of fixed crashes are replayed by every ctest run.
// A target may throw eq::Error (the parser rejected the input: expected).
// Any other exception, a crash or a sanitizer report is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "core/error.h"

namespace eq::fuzz {

using TargetFn = void (*)(std::span<const uint8_t>);

inline std::map<std::string, TargetFn>& registry() {
  static std::map<std::string, TargetFn> targets;
  return targets;
}

inline bool register_target(const char* name, TargetFn fn) {
  registry()[name] = fn;
  return true;
}

// Runs a target the way both drivers do: eq::Error is the parser saying no.
inline void run_target(TargetFn fn, std::span<const uint8_t> input) {
  try {
    fn(input);
  } catch (const eq::Error&) {
  }
}

}  // namespace eq::fuzz

#ifdef EQ_LIBFUZZER
#define EQ_FUZZ_TARGET(name)                                                        \
  static void eq_fuzz_##name(std::span<const uint8_t> input);                       \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {         \
    ::eq::fuzz::run_target(eq_fuzz_##name, std::span<const uint8_t>(data, size));   \
    return 0;                                                                       \
  }                                                                                 \
  static void eq_fuzz_##name(std::span<const uint8_t> input)
#else
#define EQ_FUZZ_TARGET(name)                                                                        \
  static void eq_fuzz_##name(std::span<const uint8_t> input);                                       \
  [[maybe_unused]] static const bool eq_fuzz_registered_##name =                                    \
      ::eq::fuzz::register_target(#name, eq_fuzz_##name);                                           \
  static void eq_fuzz_##name(std::span<const uint8_t> input)
#endif

// The fault-injection hooks (docs/reliability.md, "Fault injection") read
// their settings from the environment once per process; this is their one
// parser.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace eq::io {

// The decimal value of environment variable `name` into *out; false (and
// *out untouched) when unset, empty or malformed: a malformed value disables
// the hook instead of injecting a fault nobody asked for.
inline bool env_u64(const char* name, uint64_t* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = static_cast<uint64_t>(n);
  return true;
}

}  // namespace eq::io

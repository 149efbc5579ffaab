// The on/off measurement switches (EXPERTQUANT_GPU_ROUTED=0,
// EXPERTQUANT_GPU_SPLIT_X=1, ...; docs/cli.md): their one parser, so every
// switch reads its value the same way.
#pragma once

#include <cstdlib>

namespace eq {

// Environment variable `name` as a switch: a value starting with '0' is off,
// with '1' on; unset, empty or anything else leaves `fallback`. Callers read
// it once (a function-local static): a switch holds for the process.
inline bool env_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || (v[0] != '0' && v[0] != '1')) return fallback;
  return v[0] == '1';
}

}  // namespace eq

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

// The same switch where unset means neither: 1 on, 0 off, -1 unset (or
// anything else), for switches that force a choice otherwise made by a rule.
inline int env_switch_or_unset(const char* name) {
  return env_switch(name, false) ? 1 : env_switch(name, true) ? -1 : 0;
}

}  // namespace eq

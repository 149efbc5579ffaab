// configs/runtime.json: per-machine executor settings, written by
// `expertquant tune` and read by eval/generate. Today one value: sort_cutoff,
// the largest token count M for which auto dispatch runs the unsorted
// per-token path (it sorts when M > sort_cutoff).
//
//   {"schema": "expertquant.runtime", "version": 1, "sort_cutoff": 8,
//    "tuned": {...how it was measured...}}
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace eq::exec {

inline constexpr std::string_view kRuntimeSchema = "expertquant.runtime";
inline constexpr int kRuntimeVersion = 1;
// Used when no runtime.json is found: "sort whenever there is more than one
// token" (seed 000's sort_cutoff = 1).
inline constexpr int64_t kDefaultSortCutoff = 1;

struct RuntimeConfig {
  int64_t sort_cutoff = kDefaultSortCutoff;
  std::string source;          // the file read, or "built-in default"
  nlohmann::json tuned;        // the measurement record, if any
};

// Parses and validates; errors name `label` and the field.
RuntimeConfig parse_runtime_config(const nlohmann::json& j, const std::string& label);
RuntimeConfig load_runtime_config(const std::string& path);
// The file used when none is given: $EXPERTQUANT_RUNTIME_CONFIG, else
// configs/runtime.json in the current folder, else beside the executable's
// folder (<exe>/../configs/runtime.json, the repository for a build tree);
// empty when none exists.
std::string find_runtime_config();
// load_runtime_config(find_runtime_config()), or the built-in default.
RuntimeConfig default_runtime_config();
nlohmann::ordered_json runtime_config_to_json(const RuntimeConfig& r);

}  // namespace eq::exec

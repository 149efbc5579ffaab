// profile.json as pack reads it (schema: docs/profile.md): the header both
// readers check, and the few fields pack takes from a profile. The whole
// profile is profile::Profile (profile/profile.h).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/allocation.h"
#include "plan/fingerprint.h"

namespace eq::plan {

// 2: model.tensors (per-tensor data hashes); 3: the content checksum.
// Earlier versions are refused (re-profile).
inline constexpr int kProfileVersion = 3;
inline constexpr std::string_view kProfileSchema = "expertquant.profile";

// profile.json's "schema" and "version" (an earlier version: a "re-run
// profile" message).
void check_profile_header(const nlohmann::json& j, const std::string& label);

// profile.json's "checksum": XXH64 of json::dump() of the profile without
// that member (keys sorted, no whitespace), as manifest.json's; fed one
// array element at a time. 0 for a JSON that is not an object.
uint64_t profile_checksum(const nlohmann::json& j);
// Sets "checksum" (the writer; tests that build a profile by hand).
void seal_profile(nlohmann::json& j);
void seal_profile(nlohmann::ordered_json& j);
// Both readers, after every other check: an edit of any value is refused
// naming the file.
void check_profile_checksum(const nlohmann::json& j, const std::string& label);

// The value rules both readers apply (a re-sealed hostile file is refused
// naming the field): calibration slice counts non-negative and summing to
// calibration.tokens; per layer, token counts non-negative and the experts'
// summing to tokens × model.top_k; every expert's class and format those of
// `allocation` (the profile's own "allocation", what pack packs).
void check_profile_values(const nlohmann::json& j, const Allocation& allocation, const std::string& label);

// What a profile.json contributes to packing.
struct ProfileInputs {
  Allocation allocation;
  std::string importance_file;  // resolved against the profile's folder; empty = none
  // The policy's formats of the shared experts and dense MLPs; empty = as stored.
  std::string shared_expert_format, dense_mlp_format;
  // The checkpoint it was profiled from (config, tensor index, data hashes):
  // pack compares it with the one it packs.
  ModelFingerprint model;
};
// Checks schema and version as `profile --merge` does, and the sidecar's hash.
ProfileInputs read_profile_inputs(const std::string& path);

}  // namespace eq::plan

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

// 2: model.tensors (per-tensor data hashes). Version 1 is refused (re-profile).
inline constexpr int kProfileVersion = 2;
inline constexpr std::string_view kProfileSchema = "expertquant.profile";

// profile.json's "schema" and "version" (version 1: a "re-run profile" message).
void check_profile_header(const nlohmann::json& j, const std::string& label);

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

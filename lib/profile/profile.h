// profile.json (schema: docs/profile.md, versioned) and its importance
// sidecar: the in-memory Profile, writing (atomic), reading, and merging
// profiles of disjoint calibration slices.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "model/config.h"
#include "plan/fingerprint.h"
#include "profile/classify.h"
#include "profile/pack_time.h"
#include "profile/policy.h"
#include "profile/routing_stats.h"
#include "profile/sensitivity.h"

namespace eq::profile {

struct CalibrationSlice {
  std::string kind;  // "text", "tokens", "hidden", "router_logits", "trace"
  std::string path;
  std::string xxh64;       // of the bytes read (decompressed): the file's, or its first bytes under --max-tokens
  std::string file_xxh64;  // of the whole file (decompressed); "" in profiles written before slices
  std::string doc_separator;  // text read as documents split here ("" = one document)
  // The slice's tokens are [first_token, first_token + tokens) of the file's
  // window stream (its documents cut into windows of ctx tokens, in file order).
  int64_t first_token = 0;
  int64_t tokens = 0, windows = 0, ctx = 0;
  double seconds = 0;
};

// The first pair of slices that read the same tokens of the same file (or the
// same captures twice), as "<label a> and <label b> both hold tokens [x, y) of
// <path>"; "" when they are disjoint. labels[i] names the profile of slices[i].
std::string overlapping_slices(const std::vector<CalibrationSlice>& slices, const std::vector<std::string>& labels);

struct Profile {
  plan::ModelFingerprint model;
  std::vector<CalibrationSlice> calibration;
  RoutingStats stats;
  SensitivityTable sensitivity;
  Policy policy;
  Classification classification;
  double seconds_pass = 0, seconds_sensitivity = 0;
  std::string importance_file;  // file name beside profile.json ("" = none)
  std::string importance_xxh64;  // XXH64 (hex) of that file's bytes, checked when reading
  // Formats that import every routed expert of the checkpoint bit for bit
  // (profile/lossless_source.h); adopted by the policy when it allows.
  std::vector<std::string> lossless_formats;
  // Each candidate's quantize rate on this machine, measured by reclassify
  // when empty (pack_time.h); not stored in profile.json.
  PackRates pack_rates;

  // The dims summarize()/expert_bytes() need, rebuilt from the statistics.
  model::ModelConfig dims() const;
};

// profile.json's content, sealed (plan::seal_profile: "checksum" covers the rest).
nlohmann::ordered_json profile_to_json(const Profile& p);
// Writes `path` and, when the statistics have energies, the sidecar
// "<stem>.importance.safetensors" beside it (F64 sums, exact merge), plus the
// `also` files (e.g. the heatmap) as one output: all are replaced or, when a
// write fails, none (io::write_files_atomic).
void write_profile(Profile& p, const std::string& path, const std::vector<io::FileText>& also = {});
// "<stem>.importance.safetensors" for "<stem>.json"; sidecar_path: beside it.
std::string sidecar_name(const std::string& profile_path);
std::string sidecar_path(const std::string& profile_path);
// Reads profile.json (and its sidecar's energies, after checking the sidecar's
// XXH64 against the one profile.json records). Errors name path and field.
// Energies exist only for the experts the sidecar holds (others stay empty).
Profile read_profile(const std::string& path);
// The same on the file's text; `path` names it in errors and locates the sidecar.
Profile read_profile_text(std::string_view text, const std::string& path);

// Statistics add exactly; sensitivity becomes the sample-weighted mean;
// calibration slices are concatenated. The classification is redone by the
// caller (reclassify). Throws eq::Error when models or sources differ.
Profile merge_profiles(const std::vector<Profile>& parts, const std::vector<std::string>& labels);

// Classification by the profile's policy: a bit budget when target_bits or
// target_bytes is set; else the policy's default budget (when it has one, the
// profile has sensitivity and `thresholds` is false); else thresholds. A
// budget predicted to pack in at most `max_pack_seconds` (> 0; bit_budget.h)
// when a limit is given. p.pack_rates, when empty, are measured first on
// `device` with the default pool's threads; the classification's predicted
// pack time comes from them.
void reclassify(Profile& p, double target_bits, uint64_t target_bytes, bool thresholds = false,
                double max_pack_seconds = 0, quant::Device device = quant::Device::kCpu);

}  // namespace eq::profile

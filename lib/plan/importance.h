// Per-expert activation importance written by `expertquant profile` as a
// safetensors sidecar: "importance.L.E.in" [hidden] (sum of x^2 of the
// expert's input over its routed tokens; weights gate/up) and
// "importance.L.E.mid" [moe_intermediate] (the same for the down projection's
// input), F64 so that merged profiles add exactly. Experts never routed may be
// absent: they are quantized unweighted. profile.json names the sidecar and
// records its hash ("importance_file", "importance_xxh64"). The one writer
// and the one reader of both.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::io {
class SafetensorsFile;
}

namespace eq::plan {

enum class ImportanceSide { kIn, kMid };

class ImportanceFile {
 public:
  // Opens and checks every "importance.*" tensor name, shape and values
  // against the model dims; errors name the file and tensor.
  static std::unique_ptr<ImportanceFile> open(const std::string& path, int64_t hidden, int64_t intermediate);
  ~ImportanceFile();

  // Empty when the tensor is absent (expert never routed); values must be finite and >= 0.
  std::vector<float> load(int64_t layer, int64_t expert, ImportanceSide side) const;
  // The sums exactly as written (F64, which is required), for merging profiles;
  // empty when the tensor is absent.
  std::vector<double> load_sums(int64_t layer, int64_t expert, ImportanceSide side) const;
  const std::string& path() const { return path_; }

  static std::string tensor_name(int64_t layer, int64_t expert, ImportanceSide side);

 private:
  ImportanceFile() = default;
  std::string path_;
  std::unique_ptr<io::SafetensorsFile> file_;
};

// The energies of one expert (never empty: an expert without them is left out).
struct ExpertImportance {
  int64_t layer = 0, expert = 0;
  const std::vector<double>* in = nullptr;
  const std::vector<double>* mid = nullptr;
};
// Writes the sidecar to `path` and returns the XXH64 of its bytes; removes
// `path` again when hashing fails.
uint64_t write_importance_file(const std::string& path, const std::vector<ExpertImportance>& experts);

// profile.json records its sidecar's XXH64 ("importance_xxh64", 16 hex
// digits) so that a profile.json and a sidecar of different runs (e.g. after a
// kill between the renames of `expertquant profile`) are never used together.
uint64_t importance_file_xxh64(const std::string& sidecar_path);
// Throws eq::Error naming both files when the sidecar's bytes do not hash to
// `recorded` (or `recorded` is not 16 hex digits).
void check_importance_pairing(const std::string& profile_path, const std::string& sidecar_path,
                              const std::string& recorded);

// profile.json's "importance_file" and "importance_xxh64".
struct ImportanceRecord {
  std::string file;   // as recorded: a name beside profile.json, or a path
  std::string path;   // resolved against profile.json's folder
  std::string xxh64;  // empty in profiles written before the hash was recorded
};
// Reads both fields of the profile at `profile_path` and checks the sidecar
// against the recorded hash; nullopt when the profile names no sidecar.
std::optional<ImportanceRecord> read_importance_record(const nlohmann::json& profile, const std::string& profile_path);
// Both fields, null when `file` is empty.
void write_importance_record(nlohmann::ordered_json& profile, const std::string& file, const std::string& xxh64);

}  // namespace eq::plan

// Per-expert activation importance written by `expertquant profile` as a
// safetensors sidecar: "importance.L.E.in" [hidden] (sum of x^2 of the
// expert's input over its routed tokens; weights gate/up) and
// "importance.L.E.mid" [moe_intermediate] (the same for the down projection's
// input). Experts never routed may be absent: they are quantized unweighted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace eq::io {
class SafetensorsFile;
}

namespace eq::pack {

enum class ImportanceSide { kIn, kMid };

class ImportanceFile {
 public:
  // Opens and checks every "importance.*" tensor name, shape and values
  // against the model dims; errors name the file and tensor.
  static std::unique_ptr<ImportanceFile> open(const std::string& path, int64_t hidden, int64_t intermediate);
  ~ImportanceFile();

  // Empty when the tensor is absent (expert never routed).
  std::vector<float> load(int64_t layer, int64_t expert, ImportanceSide side) const;
  const std::string& path() const { return path_; }

  static std::string tensor_name(int64_t layer, int64_t expert, ImportanceSide side);

 private:
  ImportanceFile() = default;
  std::string path_;
  std::unique_ptr<io::SafetensorsFile> file_;
};

// profile.json records its sidecar's XXH64 ("importance_xxh64", 16 hex
// digits) so that a profile.json and a sidecar of different runs (e.g. after a
// kill between the renames of `expertquant profile`) are never used together.
uint64_t importance_file_xxh64(const std::string& sidecar_path);
// Throws eq::Error naming both files when the sidecar's bytes do not hash to
// `recorded` (or `recorded` is not 16 hex digits).
void check_importance_pairing(const std::string& profile_path, const std::string& sidecar_path,
                              const std::string& recorded);

}  // namespace eq::pack

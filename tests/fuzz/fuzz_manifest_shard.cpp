// manifest.json against a packed shard: the manifest text is parsed, its
// checksum recomputed (so the fuzzer reaches past it: what is fuzzed is a
// manifest that is self-consistent but wrong about the shard), written beside
// a tiny valid packed shard and checked by `expertquant verify`'s code, which
// bounds every slice, slot and group row by the shard header before reading.
// The shard matches the valid_* seeds of tests/fuzz/corpus/manifest_shard
// (scripts/fuzz-corpus): one int8_row group of one expert, a pruned expert
// and a global norm.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "fuzz/fuzz_target.h"
#include "io/atomic_file.h"
#include "io/json_guard.h"
#include "io/safetensors.h"
#include "pack/manifest.h"
#include "pack/verify.h"

namespace {

struct PackedFolder {
  std::string path;
  PackedFolder() {
    path = (std::filesystem::temp_directory_path() / "eq_fuzz_manifest_XXXXXX").string();
    if (!::mkdtemp(path.data())) std::abort();
    const int64_t hidden = 4, inter = 2;
    std::vector<eq::io::TensorToWrite> tensors;
    static const std::vector<float> norm(hidden, 1.0f);
    static const std::vector<int32_t> ids = {0};
    static std::vector<std::vector<uint8_t>> data;
    auto bytes = [](const auto& v) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
    };
    tensors.push_back({"model.norm.weight", eq::DType::kF32, {hidden}, bytes(norm)});
    tensors.push_back({"model.layers.0.mlp.groups.0.expert_ids", eq::DType::kI32, {1}, bytes(ids)});
    data.clear();
    data.reserve(6);
    for (const char* proj : {"gate", "up", "down"}) {
      const int64_t rows = std::string(proj) == "down" ? hidden : inter, cols = std::string(proj) == "down" ? inter : hidden;
      data.emplace_back(size_t(rows * cols), uint8_t(3));
      tensors.push_back({std::string("model.layers.0.mlp.groups.0.") + proj + ".qweight", eq::DType::kI8, {1, rows, cols},
                         bytes(data.back())});
      std::vector<float> scales(size_t(rows), 0.01f);
      data.emplace_back(reinterpret_cast<const uint8_t*>(scales.data()),
                        reinterpret_cast<const uint8_t*>(scales.data()) + scales.size() * sizeof(float));
      tensors.push_back({std::string("model.layers.0.mlp.groups.0.") + proj + ".scales", eq::DType::kF32, {1, rows},
                         bytes(data.back())});
    }
    eq::io::write_safetensors(path + "/model-00001-of-00001.safetensors", tensors);
  }
  ~PackedFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& packed_folder() {
  static const PackedFolder folder;
  return folder.path;
}

}  // namespace

EQ_FUZZ_TARGET(manifest_shard) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  eq::io::check_json_depth(text, "fuzz/manifest.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    eq::invalid(std::string("fuzz/manifest.json: not valid JSON: ") + e.what());
  }
  eq::pack::parse_manifest(j, "fuzz/manifest.json", /*check_checksum=*/false);
  j["checksum"] = eq::hash_hex(eq::pack::manifest_checksum(j));
  const std::string& folder = packed_folder();
  eq::io::write_file_atomic(folder + "/manifest.json", j.dump());
  eq::pack::verify_packed(folder);
}

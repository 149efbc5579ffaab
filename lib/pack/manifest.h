// manifest.json: the bit-allocation manifest of a packed model folder — what
// was packed from which checkpoint with which policy, where every expert's
// bytes are and their checksums, sizes before/after, and how packing went.
// Written by pack and merge; read and validated by verify, merge and the
// packed-model loader (lib/exec). Schema: docs/manifest.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "io/tensor_hashes.h"
#include "model/config.h"
#include "plan/allocation.h"

namespace eq::io {
struct TensorInfo;
}

namespace eq::pack {

// 2: the manifest checksum and the source tensor hashes. Version 1 is refused
// (re-pack): without them a hand edit or another checkpoint goes unnoticed.
inline constexpr int kManifestVersion = 2;
inline constexpr std::string_view kManifestSchema = "expertquant.manifest";
inline constexpr std::string_view kManifestFile = "manifest.json";
// Indexed by model::Proj (gate 0, up 1, down 2).
inline constexpr std::string_view kProjNames[3] = {"gate", "up", "down"};
static_assert(static_cast<int>(model::Proj::kDown) == 2 && static_cast<int>(model::Proj::kGate) == 0);

// One part of one expert: a slice of a stacked group tensor.
struct ManifestPart {
  int proj = 0;  // 0 gate, 1 up, 2 down
  std::string part;
  std::string tensor;
  uint64_t offset = 0, bytes = 0;  // byte range inside the tensor
  uint64_t xxh64 = 0;
};

struct ManifestExpert {
  int64_t expert = 0;
  plan::ExpertClass cls = plan::ExpertClass::kStandard;
  std::string format;  // empty when pruned
  double bits_per_weight = 0;  // packed bits / weights, scales included; 0 when pruned
  int group = -1, slot = -1;   // -1 when pruned
  uint64_t bytes_before = 0, bytes_after = 0;
  std::vector<ManifestPart> parts;  // proj-major, part order of the format
  // The trellis search that produced it when not the exact one ("half":
  // the GPU's FP16 search); empty otherwise.
  std::string search;
};

struct ManifestGroup {
  int id = 0;
  std::string format;
  std::vector<int64_t> expert_ids;  // slot -> expert
  std::string prefix;               // "model.layers.L.mlp.groups.G"
  std::string expert_ids_tensor;    // "<prefix>.expert_ids"
  std::vector<std::string> parts;   // part names; tensors are "<prefix>.<proj>.<part>"
  std::string tensor(int proj, const std::string& part) const;
};

// Every tensor in the shards, in file order.
struct ManifestTensor {
  std::string name;
  std::string kind;       // "copy", "quantized", "group_part", "expert_ids"
  int64_t layer = -1;     // -1: not in a layer (embeddings, final norm, head)
  std::string source;     // copy / quantized: the source tensor
  std::string format;     // quantized / group_part
  std::string part;       // quantized / group_part
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t bytes = 0, bytes_before = 0;
  uint64_t xxh64 = 0;
  int shard = 0;
};

struct ManifestShard {
  std::string file;
  uint64_t file_bytes = 0, header_bytes = 0;  // header_bytes: the 8-byte length + JSON header
  uint64_t header_xxh64 = 0, data_xxh64 = 0;
};

// A non-tensor file of the packed folder the executor reads (config.json,
// generation_config.json, tokenizer files): its size and checksum.
struct ManifestFile {
  std::string file;
  uint64_t bytes = 0, xxh64 = 0;
};

struct ByteCounts {
  uint64_t bytes_before = 0, bytes_after = 0;
  uint64_t expert_bytes_before = 0, expert_bytes_after = 0;
  uint64_t expert_weights = 0;  // weights of all experts, pruned included
  std::array<int64_t, plan::kNumClasses> class_counts{};
  // 8 * expert_bytes_after / expert_weights (pruned experts count as 0 bits).
  double avg_bits_per_expert_weight() const;
};

struct ManifestLayer {
  int64_t layer = 0;
  bool moe = true;
  std::vector<ManifestGroup> groups;
  std::vector<ManifestExpert> experts;  // index = expert id
  ByteCounts counts;
};

struct PackingStats {
  double seconds = 0;
  uint64_t max_memory_bytes = 0;       // the bound: bytes above the baseline
  uint64_t estimated_peak_bytes = 0;   // the plan's estimate, above the baseline
  uint64_t baseline_rss_bytes = 0;     // RSS when packing started
  uint64_t peak_rss_bytes = 0;         // VmHWM at the end
  uint64_t peak_above_baseline_bytes = 0;
  int threads = 1;
};

struct Manifest {
  int version = kManifestVersion;
  // XXH64 of the canonical manifest text without this field (docs/manifest.md):
  // set by seal_manifest() before writing, checked by parse_manifest().
  uint64_t checksum = 0;
  std::string tool_version;
  struct Source {
    std::string path, model_type;
    uint64_t fingerprint = 0;  // config.json and the tensor index (metadata only)
    // Every stored tensor of the source: sample hash, and the full hash of
    // those this pack read (io/tensor_hashes.h).
    io::TensorHashes tensors;
    int64_t num_layers = 0, num_experts = 0, hidden_size = 0, moe_intermediate_size = 0;
    int64_t mtp_tensors_dropped = 0;  // multi-token-prediction tensors left out (absent from the JSON when 0)
  } source;
  struct Policy {
    std::string kind;  // "uniform", "allocation", "profile"
    std::string uniform_format, attn_format, shared_format, dense_format;
    std::optional<uint64_t> allocation_xxh64, profile_xxh64, importance_xxh64;
  } policy;
  int64_t first_layer = 0, last_layer = 0;  // the packed range, inclusive
  bool has_globals = true;                   // holds the tensors outside the layers
  bool complete = true;                      // every layer and the globals present
  uint64_t shard_size = 0;
  std::vector<ManifestShard> shards;
  std::vector<ManifestFile> files;  // optional in manifests written before it existed
  std::vector<ManifestTensor> tensors;
  std::vector<ManifestLayer> layers;
  ByteCounts totals;
  uint64_t file_bytes = 0;  // sum of shard file sizes
  PackingStats packing;

};

// The files of a model folder besides config.json and the weights that a
// packed folder carries over unchanged: generation config and tokenizer files.
std::span<const char* const> side_file_names();

// config.json and the side files the packer copies (generation_config.json,
// tokenizer files) present in `folder`, sized and hashed: Manifest::files.
std::vector<ManifestFile> describe_files(const std::string& folder);
// Every difference between `m.files` and the folder: a listed file missing or
// with another size or checksum, and a side file present but not listed; one
// line each naming the file; empty when none.
std::vector<std::string> check_files(const Manifest& m, const std::string& folder);

// Recomputes per-layer and total counts from the entries.
void compute_counts(Manifest& m);

// Each entry as manifest.json holds it (docs/manifest.md); nlohmann finds
// these for `ordered_json j = entry` and for vectors of entries.
void to_json(nlohmann::ordered_json& j, const ByteCounts& c);
void to_json(nlohmann::ordered_json& j, const ManifestTensor& t);
void to_json(nlohmann::ordered_json& j, const ManifestGroup& g);
void to_json(nlohmann::ordered_json& j, const ManifestPart& p);
void to_json(nlohmann::ordered_json& j, const ManifestExpert& e);
void to_json(nlohmann::ordered_json& j, const ManifestLayer& l);
void to_json(nlohmann::ordered_json& j, const ManifestShard& s);
void to_json(nlohmann::ordered_json& j, const ManifestFile& f);
void to_json(nlohmann::ordered_json& j, const PackingStats& p);
nlohmann::ordered_json manifest_to_json(const Manifest& m);
// The checksum of the manifest's content: XXH64 of json::dump() of the
// manifest object without "checksum" (keys sorted, no whitespace), computed
// one tensor / layer at a time. The same number from the struct (before
// writing) and from parsed JSON (when reading).
uint64_t manifest_checksum(const Manifest& m);
uint64_t manifest_checksum(const nlohmann::json& j);
// Sets m.checksum; call last, right before write_manifest.
void seal_manifest(Manifest& m);
// Validates types, required fields, references (group/slot/tensor names,
// every group slot held by exactly the expert that names it, each expert
// slice exactly its slot's rows of its group's tensors), known formats, that
// stored totals equal the sums of the entries and, last, the checksum (off
// only for fuzzing the structure); errors name `label` and the field.
Manifest parse_manifest(const nlohmann::json& j, const std::string& label, bool check_checksum = true);
// Parses manifest.json text (depth-guarded JSON, then parse_manifest).
Manifest parse_manifest_text(std::string_view text, const std::string& label);
// A manifest.json larger than this is refused before it is read: a 1,000-layer
// x 1,024-expert model needs well under 2 GiB of manifest.
inline constexpr uint64_t kMaxManifestBytes = 2ull << 30;
// `path`: a manifest.json or a packed folder containing one.
Manifest load_manifest(const std::string& path);
std::string shard_file_name(int index, int count);

// The shard headers as a reader sees them: the tensor's header entry in the
// shard the manifest names, or null when that shard or tensor is absent.
using ShardHeaderLookup = std::function<const io::TensorInfo*(const ManifestTensor&)>;
// Every manifest tensor against the shard headers: present, with the dtype,
// shape and size the manifest gives. With parse_manifest's own consistency
// checks this bounds every byte a manifest field selects (expert slices,
// group slots, expert-id tensors) by the actual tensors. Returns one line per
// problem naming the shard and tensor; empty when all match.
std::vector<std::string> check_against_shards(const Manifest& m, const ShardHeaderLookup& header);

}  // namespace eq::pack

// The packed output folder, committed in one step. Rules (docs/reliability.md,
// "Outputs"):
//  * one run per destination: an exclusive lock (flock) on ".<OUT>.lock"
//    beside OUT, held from the start of the output to the end of the run; a
//    second run on the same OUT fails at once and touches nothing;
//  * each run writes its own staging folder "<OUT>.partial-<pid>-<random>";
//  * a staging folder never holds a manifest.json: the manifest is written as
//    "manifest.json.staged" and gets its final name only once the folder is
//    OUT, so verify, eval and merge refuse a staging folder ("no manifest");
//  * --force swaps the staging folder with the existing OUT
//    (renameat2 RENAME_EXCHANGE; a pair of renames where the filesystem cannot),
//    so OUT never goes missing;
//  * the next run on OUT (holding the lock) finishes or undoes a commit a kill
//    interrupted and removes the staging and moved-aside folders of killed runs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/hash.h"
#include "pack/manifest.h"

namespace eq::io {
class SafetensorsWriter;
}

namespace eq::pack {

// The manifest's name inside a folder that is not committed yet.
inline constexpr std::string_view kStagedManifestFile = "manifest.json.staged";

class OutputFolder {
 public:
  // Locks OUT, recovers what killed runs left, checks OUT (exists without
  // force = error, exit 2) and creates this run's staging folder. `marker`:
  // the file that makes the folder usable, staged as "<marker>.staged" and
  // renamed last (a packed folder's manifest.json; an export's config.json).
  OutputFolder(const std::string& out, bool force, std::string_view marker = kManifestFile);
  // Not committed (the run failed): removes the staging folder. Always
  // releases the lock. Declare it before the ShardedOutput writing into the
  // folder, so that one closes its files first.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::string& staging() const { return staging_; }
  // Streams the manifest into the staging folder as manifest.json.staged.
  void write_manifest(const Manifest& m) const;
  // "<staging>/<marker>.staged": where a caller writes the marker itself.
  std::string staged_marker_path() const;
  // fsyncs the staging folder and makes it OUT, replacing an existing OUT in
  // one step; on failure OUT is as it was. Needs the staged marker first
  // (write_manifest for a packed folder).
  void commit();

 private:
  std::string out_;      // as the user gave it (for messages)
  std::string target_;   // canonical parent + name: what is renamed
  std::string staging_;
  std::string lock_path_;
  std::string marker_, staged_marker_;  // file names inside the folder
  int lock_fd_ = -1;
  bool committed_ = false;
};

struct OutputTensor {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  int shard = 0;
};

// Writes tensors, in the declared order, into num_shards safetensors files
// (model-0000i-of-0000n.safetensors) plus model.safetensors.index.json.
class ShardedOutput {
 public:
  ShardedOutput(std::string folder, std::vector<OutputTensor> tensors, int num_shards);
  ~ShardedOutput();
  // Appends tensor `index` (must be the next one); returns the xxh64 of its bytes.
  uint64_t append(size_t index, std::span<const uint8_t> bytes);
  // The same for a tensor given as consecutive pieces.
  uint64_t append(size_t index, std::span<const std::span<const uint8_t>> pieces);
  // After the last tensor: the index file; returns the shard records.
  std::vector<ManifestShard> finish();

 private:
  void close_shard();

  std::string folder_;
  std::vector<OutputTensor> tensors_;
  int num_shards_;
  size_t next_ = 0;
  int open_shard_ = -1;
  std::unique_ptr<io::SafetensorsWriter> writer_;
  std::unique_ptr<Xxhash64> data_hash_;
  std::vector<ManifestShard> shards_;
};

// config.json of the source plus {"quantization": {...}} pointing at the manifest.
void write_packed_config(const std::string& source_folder, const std::string& out_folder);
// generation_config.json, tokenizer files etc. when present.
void copy_side_files(const std::string& source_folder, const std::string& out_folder);
// Streams the manifest to <folder>/<file_name> (layer by layer, atomically).
void write_manifest(const std::string& folder, const Manifest& m,
                    std::string_view file_name = kManifestFile);

}  // namespace eq::pack

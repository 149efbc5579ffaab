// The packed output folder: written into "<OUT>.partial/" and renamed to OUT
// only when complete, so an interrupted pack or merge never leaves a folder
// that looks finished. Shards are streamed tensor by tensor in a planned order.
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

// Checks OUT (exists without force = error) and clears a stale OUT.partial
// left by an interrupted run; returns the .partial path, created empty.
std::string begin_output(const std::string& out, bool force);
// fsyncs the partial folder, moves an existing OUT aside (force), renames
// partial -> OUT, removes the old folder.
void commit_output(const std::string& partial, const std::string& out);

// Removes OUT.partial when the pack or merge fails (an exception unwinds past
// it): a failed run leaves no partial folder behind. Declared right after
// begin_output, before the ShardedOutput writing into the folder (so that one
// closes its files first). After commit_output the folder is gone (renamed),
// so the destructor finds nothing to remove. Only a killed process leaves
// OUT.partial: it has no manifest.json, nothing opens it as a pack, and the
// next run removes it.
class PartialOutputGuard {
 public:
  explicit PartialOutputGuard(std::string partial) : partial_(std::move(partial)) {}
  ~PartialOutputGuard();
  PartialOutputGuard(const PartialOutputGuard&) = delete;
  PartialOutputGuard& operator=(const PartialOutputGuard&) = delete;

 private:
  std::string partial_;
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
// Streams the manifest to <folder>/manifest.json (layer by layer, atomically).
void write_manifest(const std::string& folder, const Manifest& m);

}  // namespace eq::pack

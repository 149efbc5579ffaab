// safetensors reading (mmap, zero-copy, fully validated) and writing (atomic,
// one pass). The format, exactly (docs/formats.md, "safetensors"):
//   u64 little-endian N | N bytes UTF-8 JSON header starting with '{', padded
//   with spaces | data buffer.
// Header entries {dtype, shape, data_offsets:[begin,end)} are relative to the
// data buffer; sorted by offset they tile it exactly (no holes, overlaps or
// trailing bytes); end-begin = numel * dtype size; "__metadata__" maps strings
// to strings; names are unique; N <= 100,000,000.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace eq::io {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets into the data buffer

  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// A zero-copy view of one tensor's bytes inside a mapped file.
struct TensorView {
  const TensorInfo* info = nullptr;
  const uint8_t* data = nullptr;

  std::span<const uint8_t> bytes() const { return {data, info->nbytes()}; }
  // Converts to float32 (any floating dtype); throws for integer dtypes.
  std::vector<float> to_f32() const;
  void to_f32(float* dst) const;
};

// One .safetensors file, memory-mapped and validated on open.
class SafetensorsFile {
 public:
  // Throws eq::Error naming the path (and tensor) on any violation.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Validates an in-memory buffer (used by tests and fuzzers); `label` names it in errors.
  static void validate_buffer(std::span<const uint8_t> buffer, const std::string& label);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order (by offset)
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;
  TensorView view(const TensorInfo& t) const;
  uint64_t file_size() const { return map_.size(); }
  uint64_t header_size() const { return header_bytes_; }
  // Advise the kernel that a tensor's pages are no longer needed (streaming).
  void release(const TensorInfo& t) const;
  // The same for bytes [offset, offset + length) of a tensor (one expert of a
  // stacked tensor); clamped to the tensor.
  void release(const TensorInfo& t, uint64_t offset, uint64_t length) const;
  // Read-ahead off (random) or back to the default for a tensor's pages
  // (io/mapped_file.h): sample hashes read three pages of every tensor.
  void set_random_access(const TensorInfo& t, bool random) const;

 private:
  std::string path_;
  MappedFile map_;
  uint64_t header_bytes_ = 0;
  const uint8_t* data_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard}}.
// Parses and validates the text: JSON object, non-empty "weight_map" of string
// values that are plain file names inside the checkpoint folder. Returns
// tensor -> shard file name; errors name `label`.
std::map<std::string, std::string> parse_shard_index(std::string_view text, const std::string& label);
// An index file larger than this is refused before it is read (a real one
// lists a few thousand tensors and is well under 10 MB).
inline constexpr uint64_t kMaxShardIndexBytes = 1ull << 30;

// A checkpoint: a single model.safetensors, a sharded set described by
// model.safetensors.index.json, or one explicit .safetensors file.
class Checkpoint {
 public:
  // `path`: a folder (model.safetensors.index.json or model.safetensors, or the
  // only *.safetensors in it) or a .safetensors file. Validates every shard and
  // the index (missing shard, tensor in no shard, shard with unlisted tensors,
  // tensor in two shards).
  static std::unique_ptr<Checkpoint> open(const std::string& path);

  // The folder holding config.json of the checkpoint at `path` (path itself,
  // or the file's folder).
  static std::string folder_of(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& folder() const { return folder_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // Sorted by name.
  std::vector<std::string> tensor_names() const;
  bool has(std::string_view name) const;
  // Throws eq::Error naming the checkpoint and tensor when absent.
  const TensorInfo& info(std::string_view name) const;
  TensorView view(std::string_view name) const;
  const SafetensorsFile& shard_of(std::string_view name) const;
  std::vector<float> load_f32(std::string_view name) const;
  uint64_t total_tensor_bytes() const;
  // Tensors stored as "<stored>X" are named "<logical>X" from now on (the
  // language model of a multimodal checkpoint read as a decoder); other
  // names are unchanged; info() and shard_of() also take the stored name.
  // Throws when a renamed tensor's name is taken.
  void rename_prefix(std::string_view stored, std::string_view logical);

 private:
  std::string path_, folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, std::pair<size_t, const TensorInfo*>, std::less<>> where_;
  // Renamed tensors under their stored names (TensorInfo::name), which
  // info() and shard_of() still accept.
  std::map<std::string, std::pair<size_t, const TensorInfo*>, std::less<>> renamed_;
  const std::pair<size_t, const TensorInfo*>& find(std::string_view name) const;
};

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

// A tensor to write: bytes are borrowed and must outlive the write call.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

// Writes one file: header (with "__metadata__" {"format":"pt", ...extra}),
// padded with spaces to a multiple of 8, then the tensors in the given order,
// to "<path>.tmp", fsync, rename to `path`. Throws eq::Error on any failure
// and removes the temporary file.
void write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Streaming writer: tensors are declared up front (so the header can be
// written first), then their bytes are appended in declaration order. Used by
// pack so one bit group at a time is in memory.
class SafetensorsWriter {
 public:
  struct Decl {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(std::string path, std::vector<Decl> decls, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();  // removes the temporary file unless finish() succeeded
  // Appends the next tensor's bytes; must match the declared size.
  void append(std::string_view name, std::span<const uint8_t> bytes);
  // The same for a tensor given as consecutive pieces (rows gathered from a
  // mapped source without copying them first).
  void append(std::string_view name, std::span<const std::span<const uint8_t>> pieces);
  // fsync + rename; throws if a declared tensor is missing.
  void finish();

 private:
  std::string path_, tmp_path_;
  std::vector<Decl> decls_;
  size_t next_ = 0;
  int fd_ = -1;
  bool finished_ = false;
};

}  // namespace eq::io

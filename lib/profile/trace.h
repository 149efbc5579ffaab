// Routing trace: the per-token routing of every MoE layer (top-k expert ids
// and gate weights), zstd-compressed, written by `profile --save-trace` and
// read back by `profile --router-logits FILE.zst` (usage statistics without
// re-running the model). Layout of the decompressed stream (little-endian):
//   header: "EQTRACE2" | u32 num_experts | u32 top_k
//   blocks: u32 layer | u32 tokens | u16 ids[tokens*top_k] | gates: the f32
//           bit patterns of tokens*top_k weights as 4 byte planes (byte 0 of
//           every gate, then byte 1, 2, 3)
//   trailer: u32 0xFFFFFFFF | u32 0 | u64 XXH64 of every byte before it,
//           checked when read (a trace without it, or "EQTRACE1", is refused)
// Blocks appear in the order the layers ran; tokens of one layer continue
// from its previous block. Written through a streaming zstd context to
// "<path>.tmp" and renamed when finished. Read back block by block (streaming
// decompression): memory is one block, whatever the trace's length.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/hash.h"

namespace eq::profile {

// Expert ids are stored as u16.
inline constexpr int64_t kMaxTraceExperts = 65536;
// tokens × top_k of one block (6 bytes each: 96 MiB): readers refuse larger
// claims before reading them; the writer splits larger batches.
inline constexpr uint64_t kMaxTraceBlockSlots = uint64_t(1) << 24;

class TraceWriter {
 public:
  TraceWriter(const std::string& path, int64_t num_experts, int64_t top_k, int level = 3);
  ~TraceWriter();  // removes the temporary file unless finish() succeeded
  // Thread-compatible (one caller at a time).
  void write_block(int64_t layer, int64_t tokens, const int32_t* ids, const float* gates);
  void finish();
  uint64_t raw_bytes() const { return raw_bytes_; }
  uint64_t compressed_bytes() const { return compressed_bytes_; }

 private:
  void push(const void* data, size_t n, bool end);
  std::string path_, tmp_path_;
  int64_t top_k_ = 0;
  int fd_ = -1;
  void* cctx_ = nullptr;
  uint64_t raw_bytes_ = 0, compressed_bytes_ = 0;
  Xxhash64 hash_;  // of the raw stream, for the trailer
  bool finished_ = false;
};

struct TraceHeader {
  int64_t num_experts = 0, top_k = 0;
  uint64_t xxh64 = 0;  // of the whole decompressed stream (set once read_trace has read it all)
};

// Reads a trace; calls on_header(header) once (it may throw, e.g. when the
// dims do not match a model) and then on_block(layer, tokens, ids, gates) per
// block. Throws eq::Error naming the file and the (decompressed) byte offset
// of a malformed block. Memory: one block, whose claimed size is checked
// against kMaxTraceBlockSlots and, for a raw trace, against the bytes left
// before anything is allocated; a compressed block's buffer grows only with
// the bytes that actually decompress.
TraceHeader read_trace(const std::string& path, const std::function<void(const TraceHeader&)>& on_header,
                       const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block);
TraceHeader read_trace(const std::string& path,
                       const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block);
// The same from bytes in memory (raw or zstd); `label` starts every error
// message (read_trace passes "trace <path>"). on_header may be empty.
TraceHeader read_trace_bytes(std::span<const uint8_t> bytes, const std::string& label,
                             const std::function<void(const TraceHeader&)>& on_header,
                             const std::function<void(int64_t, int64_t, const int32_t*, const float*)>& on_block);

// True when the file starts (after decompression) with the trace magic.
bool is_trace_file(const std::string& path);

}  // namespace eq::profile

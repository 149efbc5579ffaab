// Per-tensor hashes of a checkpoint's data: what identifies the weights a
// pack, a profile or an eval read, beyond config.json and the tensor index
// (which two checkpoints of one architecture share).
//  - sample: XXH64 of the tensor's size and three 4 KiB windows (start,
//    middle, end; the whole tensor when smaller). A few pages per tensor, so
//    every pack part and profile records one for every tensor of the model:
//    parts of two different checkpoints are told apart before any work.
//  - full: XXH64 of every stored byte, taken where the bytes are read anyway
//    (packing, profiling, eval's reference model); absent for tensors a
//    partial pack never read.
// Schema: docs/manifest.md ("Source tensor hashes").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::io {

class Checkpoint;

struct TensorHash {
  std::string name;
  uint64_t sample = 0;
  std::optional<uint64_t> full;
};
using TensorHashes = std::vector<TensorHash>;  // sorted by name, names unique

uint64_t sample_hash(std::span<const uint8_t> bytes);
// Sample hashes of every stored tensor (full empty), sorted by name; the few
// pages read are released again.
TensorHashes sample_tensor_hashes(const Checkpoint& ckpt);
// XXH64 of every byte of one stored tensor, read in chunks whose pages are
// released as soon as they are hashed (bounded memory on any tensor size).
uint64_t full_tensor_hash(const Checkpoint& ckpt, const std::string& name);
// Sets the full hash of every entry (a whole read of the checkpoint).
void add_full_hashes(const Checkpoint& ckpt, TensorHashes& hashes);

// The first tensor (by name) whose sample hashes differ, or whose full hashes
// differ where both sides have one, or that only one side lists. `a` and `b`
// describe each side's record ("sample xxh64 0123...", "xxh64 ...", "absent").
struct HashDifference {
  std::string tensor, a, b;
};
std::optional<HashDifference> first_difference(const TensorHashes& a, const TensorHashes& b);
// The same, but only over the tensors `a` lists with a full hash: what a
// reader that hashed `b` itself (eval, pack) checks against a record.
std::optional<HashDifference> first_full_difference(const TensorHashes& recorded, const TensorHashes& actual);

nlohmann::ordered_json tensor_hashes_to_json(const TensorHashes& hashes);
// Errors name `label` and `field` ("source.tensors[3].xxh64").
TensorHashes parse_tensor_hashes(const nlohmann::json& j, const std::string& label, const std::string& field);

}  // namespace eq::io

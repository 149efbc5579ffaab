// expertquant verify: re-read a packed folder and check it against its
// manifest — shard sizes and header/data hashes, every tensor's dtype, shape
// and checksum, every expert's slice checksum — and dequantize a sample of
// every group to confirm finite values. Problems are collected, each naming
// the shard and tensor (and expert) concerned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eq::pack {

struct VerifyReport {
  std::vector<std::string> problems;
  uint64_t shards = 0, tensors = 0, experts = 0, bytes = 0, sampled_matrices = 0;
  bool ok() const { return problems.empty(); }
};

// Throws eq::Error only when the manifest itself cannot be read or is invalid.
VerifyReport verify_packed(const std::string& folder, int samples_per_group = 2);

}  // namespace eq::pack

// expertquant merge: assemble packed parts made with --layers A-B (e.g. as
// independent cluster jobs) into one packed folder. Checks the parts come from
// the same checkpoint and policy and that every layer appears exactly once;
// tensors are copied byte for byte (checksums re-checked on the way), in the
// order a single pack writes them, so the result equals a single pack.
#pragma once

#include <string>
#include <vector>

#include "pack/manifest.h"

namespace eq::pack {

struct MergeRequest {
  std::vector<std::string> inputs;
  std::string out_path;
  uint64_t shard_size = 0;  // 0: the parts' shard size
  bool force = false;
};

Manifest run_merge(const MergeRequest& request);

}  // namespace eq::pack

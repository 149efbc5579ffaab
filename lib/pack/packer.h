// expertquant pack: stream a checkpoint into a packed model folder, one bit
// group at a time, within a memory bound (docs/allocation.md, docs/manifest.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pack/manifest.h"
#include "pack/plan.h"
#include "quant/device.h"
#include "quant/gpus.h"

namespace eq::io {
class Checkpoint;
}

namespace eq::pack {

struct PackRequest {
  std::string model_path, out_path;
  // Exactly one policy source.
  std::string uniform_format, allocation_path, profile_path;
  std::string attn_format;
  // Empty: the profile policy's shared_expert_format / dense_mlp_format with
  // --profile, else copied as stored.
  std::string shared_format;  // shared experts' format (never pruned either way)
  std::string dense_format;   // the dense MLPs' of the non-MoE layers
  int64_t first_layer = 0, last_layer = -1;  // inclusive; -1 = last
  uint64_t max_memory = 0;                   // bytes above the baseline RSS; 0 = default_max_memory()
  uint64_t shard_size = 4ULL << 30;
  bool force = false;
  // Where the quantizers run (--device): the output is the same either way.
  quant::Device device = quant::Device::kCpu;
  // The GPU's trellis search (--trellis-search; quant/device.h): kHalf is
  // not the CPU's bit for bit, so the manifest marks the experts it made.
  quant::TrellisSearch trellis_search = quant::TrellisSearch::kHalf;
};

// Seconds by phase. The packing thread's phases are wall time and add up to
// about the whole run; the workers' are thread-seconds summed over workers.
struct PackPhases {
  struct Entry {
    std::string name;
    double seconds = 0;
    bool thread_seconds = false;  // summed over the workers
  };
  std::vector<Entry> entries;
};

// Receives progress; called by one thread at a time (the packing thread, or
// the worker that writes a finished unit of a layer's groups).
class PackObserver {
 public:
  virtual ~PackObserver() = default;
  virtual void on_plan(const PackPlan& plan, uint64_t work_bytes) {}
  // `done_bytes` of source bytes processed so far; `what` names the step.
  virtual void on_progress(uint64_t done_bytes, const std::string& what) {}
  // Once, before the output is committed: where the time went (PackPhases).
  virtual void on_phases(const PackPhases& phases) {}
};


// Half of physical RAM (the bound counts bytes above the process baseline).
uint64_t default_max_memory();

// Validates everything and plans before creating any output; throws eq::Error.
Manifest run_pack(const PackRequest& request, PackObserver* observer = nullptr);
// With the source's config.json already parsed (`config`), e.g. by a caller
// that holds an Architecture row of its own.
Manifest run_pack(const PackRequest& request, const model::ModelConfig& config, PackObserver* observer = nullptr);

}  // namespace eq::pack

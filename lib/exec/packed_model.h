// A packed model folder ready to run: the manifest (validated), the shards
// mapped (zero-copy), per MoE layer the bit groups, the expert-id -> (group,
// slot) map and the pruned mask (lib/exec/bit_group.h), and a model::Model
// whose MoE blocks run the packed experts.
//
// The non-expert weights (embeddings, attention, norms, router, shared expert)
// are read from the source checkpoint the folder was packed from: --model, or
// the manifest's source.path. Its fingerprint must match the manifest, and
// with verification on, its bytes must match the checksums of the copies in
// the folder — so the function run is exactly the packed one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/bit_group.h"
#include "exec/dispatch.h"
#include "model/forward.h"
#include "pack/manifest.h"

namespace eq::io {
class Checkpoint;
}

namespace eq::exec {

class PackedMoeBlock;

struct PackedModelOptions {
  // Source checkpoint for the non-expert weights; empty = manifest source.path.
  std::string model_path;
  // Check every tensor of the folder (and the source copies) against the
  // manifest checksums. Off: only sizes, shapes and the fingerprint.
  bool verify = true;
  model::ModelOptions model_options;
};

struct LoadStats {
  double seconds = 0;
  uint64_t verified_bytes = 0;  // 0 when verification was off
  uint64_t expert_bytes = 0;    // packed bytes of all groups
};

class PackedModel {
 public:
  // Throws eq::Error naming the folder, tensor or manifest field at fault.
  static std::unique_ptr<PackedModel> open(const std::string& folder, const PackedModelOptions& options = {});
  ~PackedModel();

  const std::string& folder() const { return folder_; }
  const pack::Manifest& manifest() const { return manifest_; }
  const model::ModelConfig& config() const { return model_->config(); }
  const LoadStats& load_stats() const { return stats_; }
  // The forward pass (embeddings, attention, ...) with packed MoE blocks.
  model::Model& model() { return *model_; }

  // Every MoE layer, ascending.
  const std::vector<PackedLayer>& layers() const { return layers_; }
  // The packed block of MoE layer `layer` (for timing and comparisons).
  PackedMoeBlock& block(int64_t layer);
  // Sets the strategy of every packed block.
  void set_dispatch(std::shared_ptr<const Dispatch> dispatch);
  const Dispatch& dispatch() const { return *dispatch_; }
  const std::shared_ptr<const Dispatch>& dispatch_ptr() const { return dispatch_; }
  // Sets which token counts run the decode kernels in every packed block.
  void set_mlp_kernel_thresholds(const MlpKernelThresholds& t);
  // Runs the unquantized reference MoE blocks instead (same Model, same
  // non-expert weights): the baseline eval compares against.
  void use_reference(bool on);
  bool using_reference() const { return reference_; }

 private:
  PackedModel() = default;
  std::string folder_;
  pack::Manifest manifest_;
  std::unique_ptr<io::Checkpoint> packed_;
  std::unique_ptr<model::Model> model_;
  std::vector<PackedLayer> layers_;
  std::vector<PackedMoeBlock*> blocks_;  // by model layer; owned by the Model's switch blocks
  std::shared_ptr<const Dispatch> dispatch_;
  bool reference_ = false;
  LoadStats stats_;
};

}  // namespace eq::exec

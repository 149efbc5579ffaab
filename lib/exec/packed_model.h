// A packed model folder ready to run: the manifest (validated), the shards
// mapped (zero-copy), per MoE layer the bit groups, the expert-id -> (group,
// slot) map and the pruned mask (lib/exec/bit_group.h), and a model::Model
// whose MoE blocks run the packed experts.
//
// The folder is self-contained: the forward pass is built from its
// config.json and the non-expert tensors stored in it (embeddings, norms,
// router, shared expert, attention and lm_head — copies, or quantized with
// `pack --attn-format`, then applied through the format's matmul). The source
// checkpoint is needed only for comparisons: when given (--model), its config
// must match the packed one, its fingerprint the manifest's, and (with
// verification) its non-expert tensors the checksums of the copies; it is
// then loaded as the unquantized reference model (use_reference).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/bit_group.h"
#include "exec/dispatch.h"
#include "io/hashes_as_read.h"
#include "model/forward.h"
#include "pack/manifest.h"
#include "quant/device.h"

namespace eq::exec {

class PackedMoeBlock;

struct PackedModelOptions {
  // The unquantized source checkpoint, loaded as the reference model; empty =
  // none (the packed model runs alone; use_reference(true) throws).
  std::string model_path;
  // Check every tensor of the folder (and the source's copies) against the
  // manifest checksums. Off: only sizes, shapes and the fingerprint.
  bool verify = true;
  // With `verify` and a source: take the source's full hashes as its tensors
  // are converted (the reference passes read them anyway) instead of reading
  // the whole checkpoint at open; finish_source_verification() checks them.
  // The sample hashes are still checked at open.
  bool verify_source_as_read = false;
  model::ModelOptions model_options;
  // kCuda: the folder's float matrices (attention projections, dense MLPs,
  // shared experts, the logits' matrix) run on the GPU
  // (exec/cuda/device_linear.h); the routed experts go where the dispatch
  // sends them (set_dispatch). The reference model stays on the CPU.
  quant::Device dense_device = quant::Device::kCpu;
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
  // With the folder's config.json already parsed (`config`), e.g. by a caller
  // that holds an Architecture row of its own.
  static std::unique_ptr<PackedModel> open(const std::string& folder, const model::ModelConfig& config,
                                           const PackedModelOptions& options = {});
  ~PackedModel();

  const std::string& folder() const { return folder_; }
  const pack::Manifest& manifest() const { return manifest_; }
  // The packed folder's config.json.
  const model::ModelConfig& config() const { return model_->config(); }
  const LoadStats& load_stats() const { return stats_; }
  // The model that runs now: the packed forward (the folder's non-expert
  // weights, packed MoE blocks), or with use_reference(true) the unquantized
  // source model. Call again after use_reference: they are two objects.
  model::Model& model() { return reference_ ? *reference_model_ : *model_; }
  model::Model& packed_model() { return *model_; }
  // Whether the unquantized source model is loaded (PackedModelOptions::model_path).
  bool has_reference() const { return reference_model_ != nullptr; }

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
  // Makes model() the unquantized source model (its own attention, lm_head
  // and reference MoE blocks): the baseline eval compares against. Throws
  // eq::Error when no source was given.
  void use_reference(bool on);
  // With verify_source_as_read: hashes the source tensors not converted so
  // far and checks every recorded full hash; throws eq::Error naming the
  // first tensor that differs. Returns the bytes hashed (0 without it).
  uint64_t finish_source_verification();
  // Unloads the source model (its converted tensors, its mapped checkpoint)
  // once the comparisons are done; has_reference() is false after it. Call
  // finish_source_verification() first: the unchecked hashes are dropped too.
  void drop_reference();
  // Lets the OS drop the mapped pages of MoE layer `layer`'s stored tensors
  // (they stay in the page cache while memory allows): a layer-major pass of
  // either model calls it as it leaves the layer, so the pack's pages do not
  // pile up in the resident set over the pass.
  void release_layer_pages(int64_t layer) const;

 private:
  PackedModel() = default;
  static std::unique_ptr<PackedModel> open_with(const std::string& folder, const model::ModelConfig* config,
                                                const PackedModelOptions& options);
  std::string folder_, model_path_;
  pack::Manifest manifest_;
  std::unique_ptr<model::Model> model_;            // over the folder's own tensors
  std::unique_ptr<model::Model> reference_model_;  // the source checkpoint, or null
  // Declared after reference_model_: destroyed first, while the source it observes exists.
  std::unique_ptr<io::HashesAsRead> source_hashes_;
  std::vector<PackedLayer> layers_;
  std::vector<PackedMoeBlock*> blocks_;  // by model layer; owned by model_
  std::shared_ptr<const Dispatch> dispatch_;
  bool reference_ = false;
  LoadStats stats_;
};

}  // namespace eq::exec

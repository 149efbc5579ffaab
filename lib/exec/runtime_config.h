// runtime.json: per-machine executor settings, written by `expertquant tune`
// (to the user's config folder unless told otherwise) and read by
// eval/generate: sort_cutoff, the largest token
// count M for which auto dispatch runs the unsorted per-token path (it sorts
// when M > sort_cutoff), and the optional expert-MLP kernel thresholds
// (mlp_kernel.h; absent: the built-in defaults below).
//
//   {"schema": "expertquant.runtime", "version": 1, "sort_cutoff": 8,
//    "mlp_kernels": {"decode_max_tokens": 8, "small_batch_max_tokens": 64},
//    "tuned": {...how it was measured...},
//    "cuda": {"sort_cutoff": 4, "tuned": {...}}}
// "cuda" (optional; written by `tune --device cuda`) holds the GPU's own
// crossover, used when the routed experts run on the GPU (--device cuda).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/mlp_kernel.h"
#include "quant/device.h"

namespace eq::exec {

inline constexpr std::string_view kRuntimeSchema = "expertquant.runtime";
inline constexpr int kRuntimeVersion = 1;
// Used when no runtime.json is found (the built-in defaults): sort whenever there is more than one
// token (sort_cutoff = 1; only a single token runs unsorted).
inline constexpr int64_t kDefaultSortCutoff = 1;
// Used when runtime.json has no mlp_kernels: MoE calls of up to this many
// tokens run the decode kernel. Measured on the Qwen3-30B-A3B layer shape
// with every active expert receiving all M rows (the worst case for decode,
// which reads the weights once per row): decode is still faster at M = 8
// (docs/design.md, "Decode kernels"); `expertquant tune` measures the model's own.
inline constexpr int64_t kDefaultDecodeMaxTokens = 8;
// Used when runtime.json has no mlp_kernels.small_batch_max_tokens: calls of
// decode_max_tokens < M <= this run the small-batch kernel (up to 4 rows of
// an expert per weight pass); docs/benchmarks.md, "Kernel selection by M".
inline constexpr int64_t kDefaultSmallBatchMaxTokens = 64;

// Used when runtime.json has no "cuda" section: on the GPU, auto dispatch
// runs calls of up to this many tokens as one-row jobs without a sort
// (docs/benchmarks.md, "GPU MoE layer"; `tune --device cuda` measures it).
inline constexpr int64_t kDefaultCudaSortCutoff = 8;

struct RuntimeConfig {
  int64_t sort_cutoff = kDefaultSortCutoff;
  // Where the routed experts run: set from --device, never read from the file.
  quant::Device device = quant::Device::kCpu;
  int64_t cuda_sort_cutoff = kDefaultCudaSortCutoff;
  nlohmann::json cuda_tuned;   // how the "cuda" section was measured, if it was
  MlpKernelThresholds mlp_kernels{.decode_max_tokens = kDefaultDecodeMaxTokens,
                                  .small_batch_max_tokens = kDefaultSmallBatchMaxTokens};
  std::string source;          // the file read, or "built-in default"
  nlohmann::json tuned;        // the measurement record, if any
};

// Parses and validates; errors name `label` and the field.
RuntimeConfig parse_runtime_config(const nlohmann::json& j, const std::string& label);
RuntimeConfig load_runtime_config(const std::string& path);
// The per-user runtime config: $XDG_CONFIG_HOME/expertquant/runtime.json
// ($XDG_CONFIG_HOME only when absolute, as the XDG spec asks), else
// $HOME/.config/expertquant/runtime.json; empty when neither is set. A
// machine setting, so it lives with the user, never in a source tree.
std::string user_runtime_config_path();
// Where the runtime config is read from and `tune` writes to when no path is
// given: $EXPERTQUANT_RUNTIME_CONFIG when set, else user_runtime_config_path().
std::string default_runtime_config_path();
// The file used when none is given: $EXPERTQUANT_RUNTIME_CONFIG when set
// (it must exist), else the user config when it exists; empty otherwise.
std::string find_runtime_config();
// load_runtime_config(find_runtime_config()), or the built-in default.
RuntimeConfig default_runtime_config();
nlohmann::ordered_json runtime_config_to_json(const RuntimeConfig& r);
// Auto dispatch's sort cutoff where the experts run (r.device).
inline int64_t active_sort_cutoff(const RuntimeConfig& r) {
  return r.device == quant::Device::kCuda ? r.cuda_sort_cutoff : r.sort_cutoff;
}
// Writes `r` to `path` atomically, creating its folder (the user config
// folder may not exist yet); errors name the path.
void write_runtime_config(const RuntimeConfig& r, const std::string& path);

}  // namespace eq::exec

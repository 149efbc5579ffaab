// One profiling run, from a source to a classified Profile:
//   calib:          token windows (text encoded by the model's tokenizer, or token ids)
//                   through the float32 reference forward, every MoE block observed;
//   hidden:         captured router inputs moe_input.L [tokens, H]; router and
//                   experts evaluated from the checkpoint layer by layer;
//   router_logits:  router_logits.L [tokens, E] or a --save-trace file: usage only.
// Then sensitivity (when expert inputs were seen) and classification.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/layer_pass.h"
#include "quant/device.h"
#include "quant/gpus.h"
#include "profile/bit_budget.h"
#include "profile/profile.h"

namespace eq::profile {

enum class SourceKind { kCalib, kHidden, kRouterLogits };

struct ProfileRequest {
  std::string model_path;
  SourceKind source = SourceKind::kCalib;
  std::string input_path;       // the calib / hidden / router-logits file
  std::string tokens_format = "auto";
  std::string doc_separator;    // calib text: documents end here ("" = one document)
  int64_t ctx = 512;            // calib window length (tokens), like perplexity
  int64_t max_tokens = 0;       // 0 = the whole file (after the slice and skip below)
  // Calibration slices (calib only), in the file's window stream (its
  // documents cut into windows of ctx tokens, in file order): slice I of N
  // takes windows [⌊I·W/N⌋, ⌊(I+1)·W/N⌋) of the W windows; skip_tokens drops
  // the first windows holding exactly that many tokens (it must end on a
  // window boundary). Disjoint slices merge (profile --merge) into the
  // statistics of the whole.
  int64_t slice_index = 0, slice_count = 1;
  int64_t skip_tokens = 0;
  int64_t batch_windows = 8;
  Policy policy;
  int64_t min_tokens = -1;      // overrides policy.min_tokens when >= 0
  bool sensitivity = true;
  quant::Device device = quant::Device::kCpu;  // where the sensitivity measurement quantizes (--device)
  quant::TrellisSearch trellis_search = quant::TrellisSearch::kHalf;  // the GPU's trellis search (--trellis-search)
  // None: the policy's default budget, or thresholds. Its max_pack_seconds
  // limits either budget; reclassify measures the rates.
  BitBudget budget;
  bool thresholds = false;      // classify by thresholds even when the policy has a default budget
  std::string save_trace;       // write the routing trace here (.zst)
  // calib: the order of the forward pass (model/layer_pass.h): layer by
  // layer reads each layer from the checkpoint once; both orders give the
  // same profile. The layer order keeps every token's hidden state, in
  // memory up to hidden_memory bytes (0: model::default_hidden_memory()),
  // beyond it in a temporary file in spill_dir ("" = $TMPDIR).
  model::PassOrder pass_order = model::PassOrder::kLayer;
  uint64_t hidden_memory = 0;
  std::string spill_dir;
  // (phase, done, total): phase "pass" counts tokens (the window order and
  // the captured sources), "sensitivity" experts.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
  // The calib pass (either order), in place of progress("pass", ...).
  std::function<void(const model::PassProgress&)> pass_progress;
};

struct ProfileRunInfo {
  uint64_t trace_raw_bytes = 0, trace_compressed_bytes = 0;
  // Stored bytes fully hashed for the fingerprint as the pass converted them,
  // and after it (tensors the pass never read: a second read of those only).
  uint64_t bytes_hashed_as_read = 0, bytes_hashed_after = 0;
};

Profile run_profile(const ProfileRequest& request, ProfileRunInfo* info = nullptr);

}  // namespace eq::profile

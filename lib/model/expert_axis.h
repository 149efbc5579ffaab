// Which stored tensors of a checkpoint run along the routed experts of a MoE
// layer, and how: the one place that knows it for every architecture
// (Architecture::naming and ::expert_storage), so that removing experts
// (lib/prune) never compares a tensor name of its own. Names are the
// checkpoint's as the model reads them ("model.layers.<l>...."), stored tensors
// included: an fp8 weight's "<name>_scale_inv" and an mxfp4 tensor's
// "_blocks" / "_scales" belong to their expert exactly as the weight does.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "model/config.h"

namespace eq::model {

// The config.json fields that may hold the number of routed experts (which one
// a model class reads depends on the class; parse_decoder_fields accepts any
// of them and requires those present to agree).
inline constexpr std::array<std::string_view, 3> kExpertCountFields = {"num_experts", "num_local_experts",
                                                                       "n_routed_experts"};

enum class ExpertAxisKind : uint8_t {
  kNone,       // not per expert: copied as stored (attention, norms, shared experts, dense MLPs, ...)
  kOneExpert,  // belongs to expert `expert` alone: "<moe>.experts.<e>.<...>"
  kStacked,    // dim 0 runs over the layer's experts: the router's weight, bias and
               // e_score_correction_bias, and stacked expert tensors ("<moe>.experts.<name>")
};

struct ExpertAxis {
  ExpertAxisKind kind = ExpertAxisKind::kNone;
  int64_t layer = -1;
  int64_t expert = -1;       // kOneExpert
  size_t expert_pos = 0;     // kOneExpert: where the expert number starts in the name
  size_t expert_len = 0;     // ... and its digits
};

// The expert axis of stored tensor `name` (a multi-token-prediction layer's
// tensors, is_mtp_tensor, are kNone: they are not layers the config
// describes). Throws eq::Error (invalid) naming the tensor for a tensor of a
// router that is neither its weight nor one of its biases (a quantized
// router: its scales could not be sliced by expert), and for an expert
// number outside the layer's experts.
ExpertAxis expert_axis(const ModelConfig& c, std::string_view name);

}  // namespace eq::model

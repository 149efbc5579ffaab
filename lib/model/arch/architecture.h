// An architecture is data: one Architecture row per config.json model_type,
// defined in its own file under lib/model/arch/ (the registry collects every
// file there at build time, see registry.cpp). A row parses its config fields
// into the generic ModelConfig, names its tensors and states how its router,
// experts and attention work; everything downstream (forward, profile, pack,
// exec, eval, inspect) reads those fields and never compares a model_type.
// docs/adding-an-architecture.md lists the touch points.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace eq::io {
class JsonNode;
}

namespace eq::model {

struct ModelConfig;

// How the router turns logits into the top-k experts and their weights
// (lib/model/routing.h implements each; ModelConfig's router fields add the
// renormalization, selection bias, expert groups and scaling).
enum class RouterScoring : uint8_t {
  kSoftmax,      // p = softmax(logits) over all experts, top-k of p, weights = p
  kSigmoid,      // s = sigmoid(logits); top-k of s + correction bias within the best groups; weights = s
  kTopKSoftmax,  // top-k of the logits; weights = softmax over the k selected logits
};

// How routed experts are stored on disk.
enum class ExpertStorage : uint8_t {
  kPerExpert,  // three 2-D matrices per expert: <moe>.experts.<e>.<proj>.weight, [out, in]
  // One stacked tensor per layer for gate and up together, one for down:
  // <moe>.experts.gate_up_proj [E, H, 2I] and down_proj [E, I, H], applied as
  // x @ W (an mxfp4 source stores them [E, 2I, H] and [E, H, I]); gate = even
  // outputs, up = odd; optional gate_up_proj_bias [E, 2I], down_proj_bias [E, H].
  // lib/model/expert_reader.h reads both layouts.
  kStackedFusedInterleaved,
};

// Query/key normalization before RoPE.
enum class QkNorm : uint8_t {
  kNone,
  kPerHead,  // RMSNorm over each head's head_dim values, weight [head_dim]
  kWhole,    // RMSNorm over the whole q (k) projection, weight [heads * head_dim]
};

// How a layer's self-attention forms its queries, keys and values
// (lib/model/attention.cpp and latent_attention.cpp implement each).
enum class AttentionKind : uint8_t {
  // q_proj, k_proj, v_proj, o_proj; num_kv_heads key/value heads, each shared
  // by num_heads / num_kv_heads query heads.
  kGrouped,
  // Multi-head latent attention: queries from q_proj, or through a low-rank
  // q_a_proj -> q_a_layernorm -> q_b_proj; kv_a_proj_with_mqa gives a latent
  // (kv_lora_rank, normed by kv_a_layernorm) and one RoPE key shared by all
  // heads (qk_rope_head_dim); kv_b_proj expands the latent into each head's
  // non-RoPE key (qk_nope_head_dim) and value (v_head_dim).
  kLatent,
};

// Tensor names of one architecture, relative to "model.layers.<L>.". The
// checkpoint layout is HF's: "<moe>.<router>.weight",
// "<moe>.experts.<e>.<expert_proj[p]>.weight", "<moe>.<shared_expert>.<dense_proj[p]>.weight",
// "<moe>.<shared_expert_gate>.weight", dense layers "mlp.<dense_proj[p]>.weight".
struct TensorNaming {
  std::string_view moe = "mlp";
  std::string_view router = "gate";
  std::array<std::string_view, 3> expert_proj = {"gate_proj", "up_proj", "down_proj"};  // gate, up, down
  std::array<std::string_view, 3> dense_proj = {"gate_proj", "up_proj", "down_proj"};
  std::string_view shared_expert = "shared_expert";
  std::string_view shared_expert_gate = "shared_expert_gate";
};

// The config.json fields that switch optional tensors on, named in the error
// when a checkpoint holds a tensor its config switches off (the tensor would
// otherwise be silently ignored, or applied against the config). Empty: the
// architecture fixes it, no field switches it.
struct SwitchFields {
  std::string_view attention_bias = "attention_bias";  // q/k/v (and a latent layer's) projection biases
  std::string_view qk_norm = {};                       // q_norm / k_norm
  std::string_view shared_experts = {};                // the shared expert's size (0 = none)
};

struct Architecture {
  std::string_view model_type;  // as in config.json
  std::string_view description;  // one line for inspect and docs
  TensorNaming naming;
  ExpertStorage expert_storage = ExpertStorage::kPerExpert;
  SwitchFields switches = {};
  // A multimodal wrapper: the decoder's config fields are under this key of
  // config.json (its other towers are never read) ...
  std::string_view text_config = {};
  // ... and its tensors under this prefix instead of "model." (read as
  // "model." names: open_checkpoint in model/open_checkpoint.h).
  std::string_view language_model_prefix = {};
  // Fills the architecture's fields of `c` from config.json (`j`, or its
  // text_config); the fields every decoder shares are parsed before
  // (arch/common.h). Errors name the file and the field.
  void (*parse)(const io::JsonNode& j, ModelConfig& c) = nullptr;
};

// Every registered architecture, sorted by model_type.
std::span<const Architecture* const> all_architectures();
// nullptr when no architecture has this model_type.
const Architecture* find_architecture(std::string_view model_type);

}  // namespace eq::model

// Qwen3.5-MoE as its multimodal checkpoint stores it: the text model's config
// under "text_config" and its tensors under "model.language_model." (the
// vision tower, "model.visual.", is never read); the text model itself is
// qwen3_5_moe_text's.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {

const Architecture& architecture_qwen3_5_moe_text();

const Architecture& architecture_qwen3_5_moe() {
  static const Architecture row{
      .model_type = "qwen3_5_moe",
      .description = "Qwen3.5-MoE multimodal checkpoint: its text model (qwen3_5_moe_text) under text_config and "
                     "model.language_model.; the vision tower is not read",
      .naming = {},
      .switches = architecture_qwen3_5_moe_text().switches,
      .text_config = "text_config",
      .language_model_prefix = "model.language_model.",
      .parse = [](const arch::JsonNode& j, ModelConfig& c) {
        architecture_qwen3_5_moe_text().parse(j, c);
      },
  };
  return row;
}

}  // namespace eq::model

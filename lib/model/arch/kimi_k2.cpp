// Kimi-K2: the DeepSeek-V3 architecture (multi-head latent attention, grouped
// sigmoid router, ungated shared experts, dense first layers) under its own
// model_type; its config.json carries the same fields, so the row reads it
// with DeepSeek-V3's parser and names tensors as DeepSeek-V3 does.
#include "model/arch/architecture.h"

namespace eq::model {

const Architecture& architecture_deepseek_v3();

const Architecture& architecture_kimi_k2() {
  static const Architecture row{
      .model_type = "kimi_k2",
      .description = "Kimi-K2: the DeepSeek-V3 architecture (latent attention, grouped sigmoid router, shared "
                     "experts, first layers dense) under its own model_type",
      .naming = architecture_deepseek_v3().naming,
      .expert_storage = architecture_deepseek_v3().expert_storage,
      .switches = architecture_deepseek_v3().switches,
      .parse = architecture_deepseek_v3().parse,
  };
  return row;
}

}  // namespace eq::model

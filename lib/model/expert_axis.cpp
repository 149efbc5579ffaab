#include "model/expert_axis.h"

#include <string>

#include "core/error.h"
#include "io/layer_names.h"

namespace eq::model {

ExpertAxis expert_axis(const ModelConfig& c, std::string_view name) {
  ExpertAxis a;
  const auto layer = io::layer_of(name);
  if (!layer || *layer >= c.num_layers || !c.layer_is_moe[static_cast<size_t>(*layer)]) return a;
  const int64_t l = *layer;
  const std::string moe = moe_prefix(c, l);
  const std::string router_stem = moe + std::string(c.arch->naming.router) + ".";
  if (name.starts_with(router_stem)) {
    if (name != router_name(c, l) && name != router_bias_name(c, l) && name != router_correction_bias_name(c, l))
      invalid("tensor '" + std::string(name) + "': a router tensor other than its weight, bias and " +
              "e_score_correction_bias cannot be cut by expert");
    return {ExpertAxisKind::kStacked, l};
  }
  const std::string experts = moe + "experts.";
  if (!name.starts_with(experts)) return a;
  const size_t pos = experts.size();
  const auto index = io::index_at(name, pos);
  if (!index) return {ExpertAxisKind::kStacked, l};
  const int64_t e = index->value;
  if (e >= c.num_experts)
    invalid("tensor '" + std::string(name) + "': expert " + std::to_string(e) + " of a layer of " +
            std::to_string(c.num_experts) + " experts (config.json)");
  return {ExpertAxisKind::kOneExpert, l, e, pos, index->end - pos};
}

}  // namespace eq::model

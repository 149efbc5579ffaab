#include "plan/profile_inputs.h"

#include "core/error.h"
#include "plan/importance.h"
#include "plan/json_file.h"
#include "quant/format.h"

namespace eq::plan {

using nlohmann::json;

namespace {

// The policy's format of one kind of matrix outside the allocation; "" = as stored.
std::string policy_format(const json& policy, const std::string& key, const std::string& label) {
  if (!policy.is_object() || !policy.contains(key) || policy[key].is_null()) return "";
  const std::string field = label + ": field 'policy." + key + "'";
  if (!policy[key].is_string()) invalid(field + ": must be a format name (string)");
  const std::string name = policy[key].get<std::string>();
  if (!quant::find_format(name)) invalid(field + ": unknown format \"" + name + "\"");
  return name;
}

}  // namespace

void check_profile_header(const json& j, const std::string& label) {
  const auto schema = j.is_object() ? j.find("schema") : j.end();
  if (!j.is_object() || schema == j.end() || !schema->is_string() || *schema != kProfileSchema)
    invalid(label + ": field 'schema': expected \"" + std::string(kProfileSchema) + "\"");
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer())
    invalid(label + ": field 'version': missing or not an integer");
  if (v->get<int64_t>() == 1)
    invalid(label + ": field 'version': 1 predates the per-tensor model hashes (version " +
            std::to_string(kProfileVersion) + "); re-run `expertquant profile` with this expertquant");
  if (v->get<int64_t>() != kProfileVersion)
    invalid(label + ": field 'version': unsupported " + std::to_string(v->get<int64_t>()) +
            " (this reader understands version " + std::to_string(kProfileVersion) + ")");
}

ProfileInputs read_profile_inputs(const std::string& path) {
  const std::string label = "profile " + path;
  const json j = read_json_file(path, "profile");
  check_profile_header(j, label);
  if (!j.contains("allocation"))
    invalid(label + ": field 'allocation': missing (run `expertquant profile` to produce it)");
  ProfileInputs p;
  p.model = parse_fingerprint(j, label);
  p.allocation = parse_allocation(j["allocation"], label + " (allocation)");
  if (j.contains("policy")) {
    p.shared_expert_format = policy_format(j["policy"], "shared_expert_format", label);
    p.dense_mlp_format = policy_format(j["policy"], "dense_mlp_format", label);
  }
  if (const auto importance = read_importance_record(j, path)) p.importance_file = importance->path;
  return p;
}

}  // namespace eq::plan

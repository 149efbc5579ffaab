#include "plan/profile_inputs.h"

#include <limits>

#include "core/error.h"
#include "core/hash.h"
#include "io/json_checksum.h"
#include "io/json_node.h"
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
  if (v->get<int64_t>() == 2)
    invalid(label + ": field 'version': 2 predates the content checksum (version " + std::to_string(kProfileVersion) +
            "); re-run `expertquant profile` with this expertquant");
  if (v->get<int64_t>() != kProfileVersion)
    invalid(label + ": field 'version': unsupported " + std::to_string(v->get<int64_t>()) +
            " (this reader understands version " + std::to_string(kProfileVersion) + ")");
}

uint64_t profile_checksum(const json& j) { return io::canonical_json_xxh64(j); }

void seal_profile(json& j) { j["checksum"] = hash_hex(profile_checksum(j)); }

void seal_profile(nlohmann::ordered_json& j) {
  // Through text, as a reader sees it: keys sorted, numbers as they round-trip.
  j["checksum"] = hash_hex(profile_checksum(json::parse(j.dump())));
}

void check_profile_checksum(const json& j, const std::string& label) {
  const auto c = j.find("checksum");
  uint64_t recorded = 0;
  if (c == j.end() || !c->is_string() || !parse_hash_hex(c->get<std::string>(), &recorded))
    invalid(label + ": field 'checksum': missing or not 16 hex digits");
  const uint64_t actual = profile_checksum(j);
  if (actual != recorded)
    invalid(label + ": content checksum " + hash_hex(actual) + " differs from the recorded checksum " +
            hash_hex(recorded) + " (profile.json was edited or is corrupt; restore it or re-run `expertquant profile`)");
}

void check_profile_values(const json& j, const Allocation& allocation, const std::string& label) {
  const io::JsonNode root(j, label);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (const auto cal = root.find("calibration")) {
    const io::JsonNode slices = cal->at("slices");
    int64_t sum = 0;
    for (size_t i = 0; i < slices.size(); ++i) {
      const io::JsonNode s = slices.index(i);
      const int64_t first = s.integer_or("first_token", 0, 0), tokens = s.integer_or("tokens", 0, 0);
      s.integer_or("windows", 0, 0);
      s.integer_or("ctx", 0, 0);
      if (tokens > kMax - first) s.invalid_member("tokens", "first_token + tokens exceeds an int64");
      if (tokens > kMax - sum) s.invalid_member("tokens", "the slices' tokens sum past an int64");
      sum += tokens;
    }
    const io::JsonNode total = cal->at("tokens");
    if (total.integer(0) != sum)
      total.invalid(std::to_string(total.integer()) + ", but the slices hold " + std::to_string(sum) + " tokens");
  }
  const auto layers = root.find("layers");
  if (!layers) return;
  const int64_t top_k = root.at("model").at("top_k").integer(1, kMax);
  if (layers->size() != allocation.layers.size())
    layers->invalid(std::to_string(layers->size()) + " layers, but field 'allocation' has " +
                    std::to_string(allocation.layers.size()));
  for (size_t li = 0; li < layers->size(); ++li) {
    const io::JsonNode l = layers->index(li);
    const LayerAllocation& a = allocation.layers[li];
    if (l.at("layer").integer() != a.layer)
      l.invalid_member("layer", std::to_string(l.at("layer").integer()) + ", but field 'allocation' has layer " +
                                    std::to_string(a.layer) + " here");
    const int64_t tokens = l.at("tokens").integer(0);
    const io::JsonNode experts = l.at("experts");
    if (experts.size() != a.experts.size())
      experts.invalid(std::to_string(experts.size()) + " experts, but field 'allocation' has " +
                      std::to_string(a.experts.size()));
    int64_t routed = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const io::JsonNode x = experts.index(e);
      const int64_t t = x.at("tokens").integer(0, tokens);
      if (t > kMax - routed) x.invalid_member("tokens", "the layer's expert tokens sum past an int64");
      routed += t;
      const ExpertAssignment& want = a.experts[e];
      if (const auto cls = x.find("class")) {
        const std::string name = cls->str();
        const auto got = parse_class(name);
        const std::string format = x.has("format") ? x.at("format").str() : "";
        if (!got || *got != want.cls || format != want.format)
          x.invalid_member("class", name + (format.empty() ? "" : " " + format) + ", but field 'allocation' has " +
                                        std::string(class_name(want.cls)) +
                                        (want.format.empty() ? "" : " " + want.format) + " for this expert");
      }
    }
    if (tokens > kMax / top_k || routed != tokens * top_k)
      l.invalid_member("tokens", std::to_string(tokens) + " tokens × top_k " + std::to_string(top_k) +
                                     " routed slots, but the experts' tokens sum to " + std::to_string(routed));
  }
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
  check_profile_values(j, p.allocation, label);
  if (const auto importance = read_importance_record(j, path)) p.importance_file = importance->path;
  check_profile_checksum(j, label);
  return p;
}

}  // namespace eq::plan

// Policy files (configs/*.json: candidate formats, thresholds, guard rails),
// read as load_policy does: depth-guarded JSON, then parse_policy.
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "io/json_guard.h"
#include "profile/policy.h"

EQ_FUZZ_TARGET(policy) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  eq::io::check_json_depth(text, "fuzz/policy.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception&) {
    return;  // load_policy reports this as "not valid JSON"
  }
  eq::profile::parse_policy(j, "fuzz/policy.json").to_json().dump();
}

#include "prune/config_text.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/expert_axis.h"

namespace eq::prune {

namespace {

// A scanner over JSON text that records where the expert-count values of the
// decoder's object are; the text was parsed by nlohmann first, so it is valid
// and the scanner only has to find token boundaries.
class CountFields {
 public:
  CountFields(std::string_view text, std::string_view text_config_key) : t_(text), key_(text_config_key) {}

  // [begin, end) of every expert-count value, with the field's name.
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> find() {
    skip_space();
    value(/*depth=*/0, /*target=*/key_.empty());
    return found_;
  }

 private:
  void skip_space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  std::string string_token() {  // at '"'; returns the raw content (escapes kept)
    const size_t start = ++i_;
    while (t_[i_] != '"') i_ += t_[i_] == '\\' ? 2 : 1;
    return std::string(t_.substr(start, i_++ - start));
  }
  void value(int depth, bool target) {
    skip_space();
    const char ch = t_[i_];
    if (ch == '{') {
      ++i_;
      skip_space();
      if (t_[i_] == '}') {
        ++i_;
        return;
      }
      for (;;) {
        skip_space();
        const std::string k = string_token();
        skip_space();
        ++i_;  // ':'
        skip_space();
        const bool count_field = target && std::find(model::kExpertCountFields.begin(), model::kExpertCountFields.end(),
                                                     k) != model::kExpertCountFields.end();
        const size_t begin = i_;
        value(depth + 1, depth == 0 && !key_.empty() && k == key_);
        if (count_field) found_.push_back({k, {begin, i_}});
        skip_space();
        if (t_[i_++] == '}') return;  // else ','
      }
    }
    if (ch == '[') {
      ++i_;
      skip_space();
      if (t_[i_] == ']') {
        ++i_;
        return;
      }
      for (;;) {
        value(depth + 1, false);
        skip_space();
        if (t_[i_++] == ']') return;
      }
    }
    if (ch == '"') {
      string_token();
      return;
    }
    while (i_ < t_.size() && t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']' && t_[i_] != ' ' && t_[i_] != '\n' &&
           t_[i_] != '\r' && t_[i_] != '\t')
      ++i_;  // number, true, false, null
  }

  std::string_view t_, key_;
  size_t i_ = 0;
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> found_;
};

}  // namespace

std::string set_expert_count(std::string_view text, std::string_view text_config_key, int64_t experts,
                             const std::string& label) {
  nlohmann::json before;
  try {
    before = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    invalid(label + ": not valid JSON: " + e.what());
  }
  if (!before.is_object()) invalid(label + ": not a JSON object");
  auto fields = CountFields(text, text_config_key).find();
  const std::string where = text_config_key.empty() ? "" : std::string(text_config_key) + ".";
  if (fields.empty()) invalid(label + ": no expert-count field (num_experts, num_local_experts, n_routed_experts)");
  nlohmann::json& decoder = text_config_key.empty() ? before : before[std::string(text_config_key)];
  for (const auto& [name, span] : fields)
    if (!decoder[name].is_number_integer())
      invalid(label + ": field '" + where + name + "': expected an integer, found " + decoder[name].type_name());
  // Replace from the end so the earlier offsets stay valid.
  std::sort(fields.begin(), fields.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string out(text);
  for (const auto& [name, span] : fields) out.replace(span.first, span.second - span.first, std::to_string(experts));
  for (const auto& [name, span] : fields) decoder[name] = experts;
  if (nlohmann::json::parse(out) != before)
    fail(ErrorKind::kInternal, label + ": editing the expert count changed other fields");
  return out;
}

}  // namespace eq::prune

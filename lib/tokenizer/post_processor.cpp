#include "tokenizer/post_processor.h"

namespace eq::tokenizer {

namespace {

// Each sequence is encoded with these around it: the count is bounded, and
// checked as the ids are gathered, so a template that repeats a long special
// token is refused before it costs memory.
[[noreturn]] void too_many_special_tokens(const JsonNode& node) {
  node.fail(ErrorKind::kResource,
            "puts more than " + std::to_string(kMaxSpecialTokens) + " special tokens around a sequence");
}

// TemplateProcessing's "single" template: special tokens around the one
// sequence ("A"); a template with "B" in it is for pairs only.
PostProcessor from_template(const JsonNode& node) {
  const JsonNode single = node.at("single");
  single.require_array();
  const JsonNode specials = node.at("special_tokens");
  specials.require_object();
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.value().size(); ++i) {
    const JsonNode item = single.index(i);
    item.require_object();
    if (auto seq = item.find("Sequence")) {
      if (seen_sequence) seq->invalid("the single template names its sequence twice");
      seen_sequence = true;
      continue;
    }
    const JsonNode special = item.at("SpecialToken");
    const std::string name = special.at("id").str();
    auto entry = specials.find(name.c_str());
    if (!entry) special.at("id").invalid("\"" + name + "\" is not in " + specials.path());
    const JsonNode ids = entry->at("ids");
    ids.require_array();
    for (size_t k = 0; k < ids.value().size(); ++k) {
      const int64_t v = ids.index(k).integer();
      if (v < 0 || v > kMaxTokenId) ids.index(k).invalid("expected an id in [0, " + std::to_string(kMaxTokenId) + "]");
      if (before.size() + after.size() == kMaxSpecialTokens) too_many_special_tokens(single);
      (seen_sequence ? after : before).push_back(static_cast<int32_t>(v));
    }
  }
  if (!seen_sequence) single.invalid("the single template has no {\"Sequence\": ...} item");
  return PostProcessor(std::move(before), std::move(after));
}

// Roberta/Bert: "cls": [token, id] before, "sep": [token, id] after.
int32_t pair_id(const JsonNode& node, const char* key) {
  const JsonNode p = node.at(key);
  p.require_array();
  if (p.value().size() != 2) p.invalid("expected [token, id]");
  const int64_t v = p.index(1).integer();
  if (v < 0 || v > kMaxTokenId) p.index(1).invalid("expected an id in [0, " + std::to_string(kMaxTokenId) + "]");
  return static_cast<int32_t>(v);
}

}  // namespace

PostProcessor make_post_processor(const JsonNode& node) {
  if (node.is_null()) return PostProcessor({}, {});
  const std::string type = node.type();
  if (type == "TemplateProcessing") return from_template(node);
  if (type == "ByteLevel") return PostProcessor({}, {});  // trims offsets only; adds no ids
  if (type == "RobertaProcessing" || type == "BertProcessing")
    return PostProcessor({pair_id(node, "cls")}, {pair_id(node, "sep")});
  if (type == "Sequence") {
    const JsonNode list = node.at("processors");
    list.require_array();
    std::vector<int32_t> before, after;
    for (size_t i = 0; i < list.value().size(); ++i) {
      const PostProcessor p = make_post_processor(list.index(i));
      if (before.size() + after.size() + p.before().size() + p.after().size() > kMaxSpecialTokens)
        too_many_special_tokens(list.index(i));
      // Each processor wraps what the previous ones produced.
      before.insert(before.begin(), p.before().begin(), p.before().end());
      after.insert(after.end(), p.after().begin(), p.after().end());
    }
    return PostProcessor(std::move(before), std::move(after));
  }
  refuse_component(node, "post-processor", type);
}

}  // namespace eq::tokenizer

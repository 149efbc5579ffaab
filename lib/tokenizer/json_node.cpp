#include "tokenizer/json_node.h"

#include "core/error.h"
#include "core/utf8.h"

namespace eq::tokenizer {

namespace {
std::string child(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
}  // namespace

JsonNode JsonNode::at(const char* key) const {
  require_object();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null())
    eq::invalid(*file_ + ": " + child(path_, key) + ": missing (expected a value)");
  return JsonNode(*it, *file_, child(path_, key));
}

std::optional<JsonNode> JsonNode::find(const char* key) const {
  require_object();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonNode(*it, *file_, child(path_, key));
}

JsonNode JsonNode::index(size_t i) const {
  return JsonNode((*value_)[i], *file_, path_ + "[" + std::to_string(i) + "]");
}

std::string JsonNode::str() const {
  if (!value_->is_string()) invalid("expected a string, found " + std::string(value_->type_name()));
  return value_->get<std::string>();
}

std::string JsonNode::one_char() const {
  const std::string s = str();
  const size_t n = s.empty() ? 0 : utf8_sequence_length(s, 0);
  if (n == 0 || n != s.size()) invalid("expected one character, found \"" + s + "\"");
  return s;
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) invalid("expected true or false, found " + std::string(value_->type_name()));
  return value_->get<bool>();
}

int64_t JsonNode::integer() const {
  if (!value_->is_number_integer()) invalid("expected an integer, found " + std::string(value_->type_name()));
  return value_->get<int64_t>();
}

void JsonNode::require_object() const {
  if (!value_->is_object()) invalid("expected an object, found " + std::string(value_->type_name()));
}

void JsonNode::require_array() const {
  if (!value_->is_array()) invalid("expected an array, found " + std::string(value_->type_name()));
}

std::string JsonNode::str_or(const char* key, const std::string& fallback) const {
  auto n = find(key);
  return n ? n->str() : fallback;
}

bool JsonNode::bool_or(const char* key, bool fallback) const {
  auto n = find(key);
  return n ? n->boolean() : fallback;
}

void JsonNode::invalid(const std::string& what) const {
  eq::invalid(*file_ + ": " + (path_.empty() ? std::string("top level") : path_) + ": " + what);
}

void JsonNode::unsupported(const std::string& kind, const std::string& name) const {
  eq::unsupported(*file_ + ": " + path_ + ": " + kind + " \"" + name +
                  "\" is not supported (refused rather than tokenizing differently from the reference)");
}

}  // namespace eq::tokenizer

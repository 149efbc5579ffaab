#include "io/json_node.h"

#include <algorithm>

#include "core/utf8.h"

namespace eq::io {

namespace {

constexpr int64_t kMinInt = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// "an integer", "an integer >= 0", "an integer in [1, 8]".
std::string integer_range(int64_t lo, int64_t hi) {
  if (lo == kMinInt && hi == kMaxInt) return "an integer";
  if (hi == kMaxInt) return "an integer >= " + std::to_string(lo);
  if (lo == kMinInt) return "an integer <= " + std::to_string(hi);
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

std::string JsonNode::child(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

JsonNode JsonNode::at(const char* key) const {
  require_object();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) invalid_member(key, "missing");
  return JsonNode(*it, *file_, child(key));
}

std::optional<JsonNode> JsonNode::find(const char* key) const {
  require_object();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonNode(*it, *file_, child(key));
}

bool JsonNode::has(const char* key) const { return find(key).has_value(); }

bool JsonNode::has_null(const char* key) const {
  require_object();
  auto it = value_->find(key);
  return it != value_->end() && it->is_null();
}

std::optional<JsonNode> JsonNode::nullable(const char* key) const {
  const JsonNode m = member(key);
  if (m.is_null()) return std::nullopt;
  return m;
}

JsonNode JsonNode::member(const std::string& key) const {
  require_object();
  auto it = value_->find(key);
  if (it == value_->end()) invalid_member(key, "missing");
  return JsonNode(*it, *file_, child(key));
}

JsonNode JsonNode::index(size_t i) const {
  return JsonNode((*value_)[i], *file_, path_ + "[" + std::to_string(i) + "]");
}

size_t JsonNode::size() const {
  require_array();
  return value_->size();
}

std::string JsonNode::str() const {
  if (!value_->is_string()) wrong_type("a string");
  return value_->get<std::string>();
}

std::string JsonNode::one_char() const {
  const std::string s = str();
  const size_t n = s.empty() ? 0 : utf8_sequence_length(s, 0);
  if (n == 0 || n != s.size()) invalid("expected one character, found \"" + s + "\"");
  return s;
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) wrong_type("true or false");
  return value_->get<bool>();
}

int64_t JsonNode::integer(int64_t lo, int64_t hi) const {
  if (!value_->is_number_integer()) wrong_type(integer_range(lo, hi));
  const int64_t v = value_->get<int64_t>();
  if (v < lo || v > hi) invalid("expected " + integer_range(lo, hi) + ", got " + std::to_string(v));
  return v;
}

uint64_t JsonNode::unsigned_integer() const {
  if (!value_->is_number_unsigned() && !(value_->is_number_integer() && value_->get<int64_t>() >= 0)) {
    if (value_->is_number_integer()) invalid("expected an integer >= 0, got " + value_->dump());
    wrong_type("an integer >= 0");
  }
  return value_->get<uint64_t>();
}

double JsonNode::number() const {
  if (!value_->is_number()) wrong_type("a number");
  return value_->get<double>();
}

double JsonNode::number(double lo, double hi) const {
  const std::string range = "a number in [" + nlohmann::json(lo).dump() + ", " + nlohmann::json(hi).dump() + "]";
  if (!value_->is_number()) wrong_type(range);
  const double v = value_->get<double>();
  if (!(v >= lo && v <= hi)) invalid("expected " + range + ", got " + value_->dump());
  return v;
}

void JsonNode::require_object() const {
  if (!value_->is_object()) wrong_type("an object");
}

void JsonNode::require_array() const {
  if (!value_->is_array()) wrong_type("an array");
}

void JsonNode::allow_only(std::initializer_list<std::string_view> keys) const {
  require_object();
  for (auto it = value_->begin(); it != value_->end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      JsonNode(*it, *file_, child(it.key())).invalid("unknown key");
}

std::string JsonNode::str_or(const char* key, const std::string& fallback) const {
  auto n = find(key);
  return n ? n->str() : fallback;
}

bool JsonNode::bool_or(const char* key, bool fallback) const {
  auto n = find(key);
  return n ? n->boolean() : fallback;
}

int64_t JsonNode::integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
  auto n = find(key);
  return n ? n->integer(lo, hi) : fallback;
}

double JsonNode::number_or(const char* key, double fallback) const {
  auto n = find(key);
  return n ? n->number() : fallback;
}

void JsonNode::invalid_member(std::string_view key, const std::string& what) const {
  JsonNode(*value_, *file_, child(key)).invalid(what);
}

void JsonNode::fail(ErrorKind kind, const std::string& what) const {
  eq::fail(kind, *file_ + ": " + (path_.empty() ? std::string() : "field '" + path_ + "': ") + what);
}

void JsonNode::wrong_type(const std::string& what) const {
  invalid("expected " + what + ", found " + std::string(value_->type_name()));
}

}  // namespace eq::io

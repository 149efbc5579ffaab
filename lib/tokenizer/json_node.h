// A JSON value together with the file it came from and its path inside it
// ("model.merges[12]"), so every complaint about a tokenizer file names both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::tokenizer {

class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, const std::string& file, std::string path)
      : value_(&value), file_(&file), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }

  // A member that must be present (null counts as absent).
  JsonNode at(const char* key) const;
  // A member that may be absent or null.
  std::optional<JsonNode> find(const char* key) const;
  JsonNode index(size_t i) const;

  bool is_null() const { return value_->is_null(); }
  std::string str() const;
  // A string of exactly one character (Metaspace's replacement, Strip's content).
  std::string one_char() const;
  bool boolean() const;
  int64_t integer() const;
  void require_object() const;
  void require_array() const;

  // Optional members with a default.
  std::string str_or(const char* key, const std::string& fallback) const;
  bool bool_or(const char* key, bool fallback) const;

  // The "type" member of a component object.
  std::string type() const { return at("type").str(); }

  // exit 2: "<file>: <path>: <what>".
  [[noreturn]] void invalid(const std::string& what) const;
  // exit 4: a component of `kind` (normalizer, model, ...) this tokenizer does not implement.
  [[noreturn]] void unsupported(const std::string& kind, const std::string& name) const;

 private:
  const nlohmann::json* value_;
  const std::string* file_;
  std::string path_;
};

// The components of a Sequence (normalizers, pre-tokenizers, decoders): each
// element of node[key] through `make`, null results (components that do
// nothing) left out.
template <class Make>
auto sequence_of(const JsonNode& node, const char* key, Make make) {
  const JsonNode list = node.at(key);
  list.require_array();
  std::vector<decltype(make(list))> parts;
  for (size_t i = 0; i < list.value().size(); ++i)
    if (auto p = make(list.index(i))) parts.push_back(std::move(p));
  return parts;
}

}  // namespace eq::tokenizer

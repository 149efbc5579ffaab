// A JSON value together with the file it came from and its path inside it
// ("layers[3].experts[5].slot"), so every complaint about a file we read
// names both: `config.json: field 'text_config.num_experts': expected an
// integer, found string`. The typed getters check type and range; the schema
// readers (config.json, manifest.json, profile.json, policies, runtime.json,
// tokenizer.json) read through it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eq::io {

class JsonNode {
 public:
  // `file` must outlive the node and every node reached from it.
  JsonNode(const nlohmann::json& value, const std::string& file, std::string path = {})
      : value_(&value), file_(&file), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }

  // A member that must be present (null counts as absent).
  JsonNode at(const char* key) const;
  // A member that may be absent or null.
  std::optional<JsonNode> find(const char* key) const;
  // Present and not null.
  bool has(const char* key) const;
  // Present and null (where null means something else than absent).
  bool has_null(const char* key) const;
  // A member that must be present but may be null (nullopt for null).
  std::optional<JsonNode> nullable(const char* key) const;
  // A member that must be present, null or not (an object's keys as iterated).
  JsonNode member(const std::string& key) const;
  JsonNode index(size_t i) const;
  // The number of elements of an array (which it must be).
  size_t size() const;

  bool is_null() const { return value_->is_null(); }
  std::string str() const;
  // A string of exactly one character (Metaspace's replacement, Strip's content).
  std::string one_char() const;
  bool boolean() const;
  int64_t integer(int64_t lo = std::numeric_limits<int64_t>::min(),
                  int64_t hi = std::numeric_limits<int64_t>::max()) const;
  uint64_t unsigned_integer() const;
  double number() const;
  // A number in [lo, hi].
  double number(double lo, double hi) const;
  void require_object() const;
  void require_array() const;
  // An object whose keys are all among `keys`.
  void allow_only(std::initializer_list<std::string_view> keys) const;

  // Optional members with a default (absent or null).
  std::string str_or(const char* key, const std::string& fallback) const;
  bool bool_or(const char* key, bool fallback) const;
  int64_t integer_or(const char* key, int64_t fallback, int64_t lo = std::numeric_limits<int64_t>::min(),
                     int64_t hi = std::numeric_limits<int64_t>::max()) const;
  double number_or(const char* key, double fallback) const;

  // The "type" member of a component object.
  std::string type() const { return at("type").str(); }

  // "<file>: field '<path>': <what>" ("<file>: <what>" at the top level); exit 2.
  [[noreturn]] void invalid(const std::string& what) const { fail(ErrorKind::kInvalidInput, what); }
  // The same for member `key`, present or not (a rule between fields).
  [[noreturn]] void invalid_member(std::string_view key, const std::string& what) const;
  // The same message with another kind (a size limit: kResource).
  [[noreturn]] void fail(ErrorKind kind, const std::string& what) const;
  // The same message, exit 4: valid input this reader does not implement.
  [[noreturn]] void unsupported(const std::string& what) const { fail(ErrorKind::kUnsupported, what); }

 private:
  std::string child(std::string_view key) const;
  // "expected <what>, found <type>".
  [[noreturn]] void wrong_type(const std::string& what) const;

  const nlohmann::json* value_;
  const std::string* file_;
  std::string path_;
};

}  // namespace eq::io

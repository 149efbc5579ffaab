// Finding and reading tokenizer files: tokenizer.json (+ tokenizer_config.json)
// or, for byte-level models without them, the byte tokenizer.
#include <filesystem>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/text_file.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace eq::tokenizer {

namespace {

// tokenizer.json files of current models are up to ~30 MB.
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;

nlohmann::json parse_json_text(std::string_view text, const std::string& label) {
  io::check_json_depth(text, label);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number too large for a double
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    eq::invalid(label + ": not valid JSON: " + what);
  }
}

nlohmann::json parse_json_file(const std::string& path) {
  return parse_json_text(io::read_file_bytes(path, kMaxTokenizerFileBytes), path);
}

// A token named in tokenizer_config.json: a string or {"content": ...}.
std::string config_token(const JsonNode& root, const char* key) {
  auto n = root.find(key);
  if (!n) return {};
  if (n->value().is_object()) return n->at("content").str();
  return n->str();
}

TokenizerConfig read_config(const std::string& path) {
  TokenizerConfig c;
  if (path.empty()) return c;
  const nlohmann::json j = parse_json_file(path);
  const JsonNode root(j, path, "");
  root.require_object();
  if (auto b = root.find("add_bos_token")) c.add_bos = b->boolean();
  if (auto e = root.find("add_eos_token")) c.add_eos = e->boolean();
  c.bos_token = config_token(root, "bos_token");
  c.eos_token = config_token(root, "eos_token");
  return c;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path, const std::string& config_path) {
  const TokenizerConfig config = read_config(config_path);
  const nlohmann::json j = parse_json_file(path);
  const JsonNode root(j, path, "");
  return std::make_unique<HfTokenizer>(root, config, path);
}

std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view json, const std::string& label) {
  const nlohmann::json j = parse_json_text(json, label);
  const JsonNode root(j, label, "");
  return std::make_unique<HfTokenizer>(root, TokenizerConfig{}, label);
}

namespace {

// <model_dir>/tokenizer.json (or .zst), "" when there is none.
std::string tokenizer_json_path(const std::string& model_dir) {
  namespace fs = std::filesystem;
  for (const char* name : {"tokenizer.json", "tokenizer.json.zst"})
    if (fs::exists(fs::path(model_dir) / name)) return (fs::path(model_dir) / name).string();
  return {};
}

}  // namespace

bool has_tokenizer(const std::string& model_dir, int64_t model_vocab_size) {
  return model_vocab_size == 256 || !tokenizer_json_path(model_dir).empty();
}

std::unique_ptr<Tokenizer> load_tokenizer_file_beside_config(const std::string& path) {
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  return load_tokenizer_file(path, std::filesystem::exists(config) ? config.string() : std::string());
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir, int64_t model_vocab_size) {
  const std::string json_path = tokenizer_json_path(model_dir);
  if (json_path.empty()) {
    if (model_vocab_size == 256) return std::make_unique<ByteTokenizer>();
    eq::invalid(model_dir + ": no tokenizer.json, and the model's vocabulary (" + std::to_string(model_vocab_size) +
                ") is not bytes: add the model's tokenizer.json or pass token ids");
  }
  auto tok = load_tokenizer_file_beside_config(json_path);
  if (model_vocab_size > 0 && tok->vocab_size() > model_vocab_size)
    eq::invalid(json_path + ": the tokenizer has ids up to " + std::to_string(tok->vocab_size() - 1) +
                " but the model's vocab_size is " + std::to_string(model_vocab_size) + " (" + model_dir +
                "/config.json)");
  return tok;
}

int64_t read_model_vocab_size(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  const nlohmann::json j = parse_json_file(path);
  const JsonNode root(j, path, "");
  root.require_object();
  std::optional<JsonNode> v = root.find("vocab_size");
  if (!v)
    if (auto text = root.find("text_config")) v = text->find("vocab_size");
  if (!v) root.at("vocab_size");  // throws naming the missing field
  const int64_t n = v->integer();
  if (n <= 0 || n > kMaxTokenId + 1) v->invalid("expected a vocabulary size in [1, " + std::to_string(kMaxTokenId + 1) + "]");
  return n;
}

}  // namespace eq::tokenizer

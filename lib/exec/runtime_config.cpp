#include "exec/runtime_config.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_node.h"
#include "io/text_file.h"

namespace eq::exec {

RuntimeConfig parse_runtime_config(const nlohmann::json& j, const std::string& label) {
  const io::JsonNode root(j, label);
  root.require_object();
  if (j.contains("schema") && j["schema"] != kRuntimeSchema)
    root.member("schema").invalid("expected \"" + std::string(kRuntimeSchema) + "\", got " + j["schema"].dump());
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kRuntimeVersion)
    root.invalid_member("version", "missing or unsupported (this reader understands version 1)");
  RuntimeConfig r;
  r.source = label;
  r.sort_cutoff = root.at("sort_cutoff").integer(0);
  if (const auto k = root.find("mlp_kernels")) {
    r.mlp_kernels.decode_max_tokens = k->integer_or("decode_max_tokens", r.mlp_kernels.decode_max_tokens, 0);
    r.mlp_kernels.small_batch_max_tokens =
        k->integer_or("small_batch_max_tokens", r.mlp_kernels.small_batch_max_tokens, 0);
  }
  if (j.contains("tuned")) r.tuned = j["tuned"];
  if (const auto k = root.find("cuda")) {
    k->require_object();
    r.cuda_sort_cutoff = k->integer_or("sort_cutoff", r.cuda_sort_cutoff, 0);
    if (j["cuda"].contains("tuned")) r.cuda_tuned = j["cuda"]["tuned"];
  }
  return r;
}

RuntimeConfig load_runtime_config(const std::string& path) {
  const std::string text = io::read_file_bytes(path, 1 << 24);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    invalid(path + ": not valid JSON (" + e.what() + ")");
  }
  return parse_runtime_config(j, path);
}

namespace {

std::string env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string user_runtime_config_path() {
  const std::string xdg = env_value("XDG_CONFIG_HOME");
  if (!xdg.empty() && xdg.front() == '/') return xdg + "/expertquant/runtime.json";
  const std::string home = env_value("HOME");
  if (!home.empty()) return home + "/.config/expertquant/runtime.json";
  return {};
}

std::string default_runtime_config_path() {
  const std::string env = env_value("EXPERTQUANT_RUNTIME_CONFIG");
  return env.empty() ? user_runtime_config_path() : env;
}

std::string find_runtime_config() {
  if (const std::string env = env_value("EXPERTQUANT_RUNTIME_CONFIG"); !env.empty()) return env;
  const std::string user = user_runtime_config_path();
  std::error_code ec;
  if (!user.empty() && std::filesystem::exists(user, ec)) return user;
  return {};
}

RuntimeConfig default_runtime_config() {
  const std::string path = find_runtime_config();
  if (path.empty()) {
    RuntimeConfig r;
    r.source = "built-in default";
    return r;
  }
  return load_runtime_config(path);
}

nlohmann::ordered_json runtime_config_to_json(const RuntimeConfig& r) {
  nlohmann::ordered_json j;
  j["schema"] = kRuntimeSchema;
  j["version"] = kRuntimeVersion;
  j["sort_cutoff"] = r.sort_cutoff;
  j["mlp_kernels"] = {{"decode_max_tokens", r.mlp_kernels.decode_max_tokens},
                      {"small_batch_max_tokens", r.mlp_kernels.small_batch_max_tokens}};
  if (!r.tuned.is_null()) j["tuned"] = r.tuned;
  if (r.cuda_sort_cutoff != kDefaultCudaSortCutoff || !r.cuda_tuned.is_null()) {
    j["cuda"] = {{"sort_cutoff", r.cuda_sort_cutoff}};
    if (!r.cuda_tuned.is_null()) j["cuda"]["tuned"] = r.cuda_tuned;
  }
  return j;
}

void write_runtime_config(const RuntimeConfig& r, const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    std::filesystem::create_directories(folder, ec);
    if (ec) fail(ErrorKind::kIo, path + ": cannot create the folder " + folder.string() + ": " + ec.message());
  }
  io::write_file_atomic(path, runtime_config_to_json(r).dump(2) + "\n");
}

}  // namespace eq::exec

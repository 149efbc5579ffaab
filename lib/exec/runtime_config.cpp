#include "exec/runtime_config.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text_file.h"

namespace eq::exec {

RuntimeConfig parse_runtime_config(const nlohmann::json& j, const std::string& label) {
  auto bad = [&](const std::string& field, const std::string& what) { invalid(label + ": " + field + ": " + what); };
  if (!j.is_object()) bad("(top level)", "not a JSON object");
  if (j.contains("schema") && j["schema"] != kRuntimeSchema)
    bad("schema", "expected \"" + std::string(kRuntimeSchema) + "\", got " + j["schema"].dump());
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kRuntimeVersion)
    bad("version", "missing or unsupported (this reader understands version 1)");
  RuntimeConfig r;
  r.source = label;
  if (!j.contains("sort_cutoff") || !j["sort_cutoff"].is_number_integer() || j["sort_cutoff"].get<int64_t>() < 0)
    bad("sort_cutoff", "missing or not an integer >= 0");
  r.sort_cutoff = j["sort_cutoff"].get<int64_t>();
  if (j.contains("mlp_kernels")) {
    const nlohmann::json& k = j["mlp_kernels"];
    if (!k.is_object()) bad("mlp_kernels", "not a JSON object");
    if (k.contains("decode_max_tokens")) {
      if (!k["decode_max_tokens"].is_number_integer() || k["decode_max_tokens"].get<int64_t>() < 0)
        bad("mlp_kernels.decode_max_tokens", "not an integer >= 0");
      r.mlp_kernels.decode_max_tokens = k["decode_max_tokens"].get<int64_t>();
    }
    if (k.contains("small_batch_max_tokens")) {
      if (!k["small_batch_max_tokens"].is_number_integer() || k["small_batch_max_tokens"].get<int64_t>() < 0)
        bad("mlp_kernels.small_batch_max_tokens", "not an integer >= 0");
      r.mlp_kernels.small_batch_max_tokens = k["small_batch_max_tokens"].get<int64_t>();
    }
  }
  if (j.contains("tuned")) r.tuned = j["tuned"];
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

#include "plan/json_file.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/text_file.h"

namespace eq::plan {

using nlohmann::json;

namespace {

// Allocation and profile files list one short entry per expert: 1 GiB is far
// beyond any real model and is refused before reading.
constexpr uint64_t kMaxPolicyFileBytes = 1ull << 30;

}  // namespace

json parse_json(std::string_view text, const std::string& label) {
  io::check_json_depth(text, label);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(label + ": not valid JSON: " + e.what());
  }
}

json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(ErrorKind::kIo, what + " " + path + ": cannot open");
  return parse_json(io::read_file_bytes(path, kMaxPolicyFileBytes), what + " " + path);
}

}  // namespace eq::plan

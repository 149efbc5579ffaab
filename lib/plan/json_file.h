// The JSON files plan reads (allocations, profile.json as pack reads it):
// depth-guarded, size-bounded, errors naming the file.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace eq::plan {

// Parses `text` after io::check_json_depth; errors name `label`.
nlohmann::json parse_json(std::string_view text, const std::string& label);
// Reads and parses `path`; errors name "<what> <path>".
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace eq::plan

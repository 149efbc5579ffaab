#include "json_output.h"

#include <algorithm>
#include <cstdio>

namespace eq::app {

void add_json_options(CLI::App* sub, JsonOutput& o, const std::string& what) {
  sub->add_flag("--json", o.print, "Print " + what + " as JSON on stdout instead of the human output");
  sub->add_option("--json-out", o.file, "Also write " + what + " as JSON to FILE (written atomically)")
      ->type_name("FILE")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text.empty()) return "expected a file path, got ''";
            if (text == "-") return "expected a file path, got '-' (for JSON on stdout use --json)";
            return {};
          },
          ""));
}

void emit_json(const JsonOutput& o, const nlohmann::ordered_json& j, std::vector<io::FileText> also) {
  const std::string text = j.dump(2) + "\n";
  if (!o.file.empty()) also.insert(also.begin(), io::FileText{o.file, text});
  if (!also.empty()) io::write_files_atomic(also);
  if (o.print) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
}

std::string json_value_misuse(const std::vector<std::string>& args, const std::vector<std::string>& unexpected) {
  auto misuse = [](const std::string& value) {
    if (value == "-") return std::string("--json takes no value: it prints the JSON on stdout (drop the '-')");
    return "--json takes no value (it prints the JSON on stdout); to write it to a file use --json-out " + value;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--json=", 0) == 0) return misuse(args[i].substr(7));
    if (args[i] == "--json" && i + 1 < args.size() &&
        std::find(unexpected.begin(), unexpected.end(), args[i + 1]) != unexpected.end())
      return misuse(args[i + 1]);
  }
  return {};
}

}  // namespace eq::app

// expertquant formats: every quantization format of the registry with its
// size, block shape and the kernels it runs on this CPU (lib/quant/format_info).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "json_output.h"
#include "quant/format_info.h"

namespace eq::app {

namespace {
struct FormatsCliOptions {
  JsonOutput json;
};

void print_table(const std::vector<quant::FormatInfo>& all) {
  std::printf("%-14s %9s  %-28s %-18s %-26s %s\n", "format", "bits/w", "block", "shape", "decode", "prefill");
  for (const auto& f : all)
    std::printf("%-14s %9.3f  %-28s %-18s %-26s %s\n", f.name.c_str(), f.bits_per_weight, f.block.c_str(),
                f.shape_rule.c_str(), f.decode.c_str(), f.prefill.c_str());
  std::printf("\n");
  for (const auto& f : all) std::printf("%-14s %s\n", f.name.c_str(), f.description.c_str());
}

nlohmann::ordered_json formats_json(const std::vector<quant::FormatInfo>& all) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& f : all)
    j.push_back({{"name", f.name}, {"bits_per_weight", f.bits_per_weight}, {"block", f.block},
                 {"shape", f.shape_rule}, {"decode", f.decode}, {"prefill", f.prefill},
                 {"description", f.description}});
  return j;
}

}  // namespace

std::string formats_help_footer() {
  std::string s = "Formats (expertquant formats for details):\n";
  for (const quant::FormatInfo& f : quant::describe_formats()) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-14s %6.3f bits/weight  %s\n", f.name.c_str(), f.bits_per_weight,
                  f.block.c_str());
    s += line;
  }
  return s;
}

Command add_formats(CLI::App& app) {
  auto o = std::make_shared<FormatsCliOptions>();
  CLI::App* sub = app.add_subcommand("formats", "List the quantization formats: size, block shape, kernels on this CPU");
  add_json_options(sub, o->json, "the list");
  return {sub, [o] {
            const std::vector<quant::FormatInfo> all = quant::describe_formats();
            if (!o->json.print) print_table(all);
            if (o->json.wanted()) emit_json(o->json, formats_json(all));
            return 0;
          }};
}

}  // namespace eq::app

// Machine-readable output, one convention for every subcommand:
//   --json           the command's JSON on stdout, in place of its human
//                    output (progress, notes and logs stay on stderr);
//   --json-out FILE  the same JSON written to FILE (atomically), the human
//                    output unchanged.
// Both may be given together.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/output_path.h"

namespace eq::app {

struct JsonOutput {
  bool print = false;  // --json
  std::string file;    // --json-out FILE ("" = none)
  bool wanted() const { return print || !file.empty(); }
  // For io::check_outputs_apart: --json-out must not replace an input.
  io::NamedPath output() const { return {"--json-out", file}; }
};

// Adds --json and --json-out to `sub`; `what` says what the JSON holds
// ("the summary", "the report (docs/report.md)").
void add_json_options(CLI::App* sub, JsonOutput& o, const std::string& what);

// Writes --json-out together with `also` (all replaced or none: eval's
// --html), then prints the JSON on stdout for --json.
void emit_json(const JsonOutput& o, const nlohmann::ordered_json& j, std::vector<io::FileText> also = {});

// When a command line that failed to parse gave --json a value (`--json FILE`
// left FILE unexpected, or `--json=FILE`), the one-line error that says so and
// names --json-out; empty otherwise. `unexpected`: the arguments the parser
// could not place.
std::string json_value_misuse(const std::vector<std::string>& args, const std::vector<std::string>& unexpected);

}  // namespace eq::app

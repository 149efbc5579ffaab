// Options shared by eval, tune and generate: the evaluation texts / token
// files, and the executor options (dispatch, cutoff, runtime config).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/text_inputs.h"
#include "exec/dispatch.h"
#include "exec/runtime_config.h"
#include "io/output_path.h"

namespace eq::app {

// --text, --tokens, --max-tokens and --doc-separator (lib/eval/text_inputs.h).
void add_text_options(CLI::App* sub, eval::TextInputs& in, const std::string& max_tokens_help);
// The --doc-separator option, shared by every command that reads text.
void add_doc_separator_option(CLI::App* sub, std::string& separator);
// --doc-separator with its C escapes (\n, \xHH, ...) decoded.
std::string doc_separator(const std::string& typed);
// The files of --text / --tokens, for io::check_outputs_apart.
std::vector<io::NamedPath> input_paths(const eval::TextInputs& in);

struct ExecFlags {
  std::string runtime_config;
  int64_t sort_cutoff = -1;  // -1: from the runtime config
  int64_t decode_max_tokens = -1;  // -1: from the runtime config
  int64_t small_batch_max_tokens = -1;  // -1: from the runtime config
  std::string device = "cpu";  // where the routed experts run
};
void add_exec_options(CLI::App* sub, ExecFlags& f);
exec::RuntimeConfig resolve_runtime(const ExecFlags& f);

// "1,2,4" -> {1, 2, 4}, each in [1, max_value]; throws eq::Error naming `what`.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what, int64_t max_value);

}  // namespace eq::app

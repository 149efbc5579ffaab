// Inputs shared by eval, tune and generate: evaluation texts / token files
// into labeled token sequences, and the executor options (dispatch, cutoff,
// runtime config) as CLI flags.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/quality.h"
#include "exec/dispatch.h"
#include "exec/runtime_config.h"
#include "io/output_path.h"

namespace eq::app {

struct TextInputs {
  std::vector<std::string> texts, token_files;
  int64_t max_tokens = 0;  // per text; 0 = all
  std::string doc_separator;  // as typed (C escapes decoded when read)
};
void add_text_options(CLI::App* sub, TextInputs& in, const std::string& max_tokens_help);
// "data/corpus/eval_prose.txt.zst" -> "prose"; token files keep their stem.
std::string domain_label(const std::string& path);
// --text is encoded by the tokenizer of the model in `model_folder` (read only
// when there is text).
std::vector<eval::LabeledTokens> read_inputs(const TextInputs& in, const std::string& model_folder, int64_t vocab_size);
// The --doc-separator option, shared by every command that reads text.
void add_doc_separator_option(CLI::App* sub, std::string& separator);
// --doc-separator with its C escapes (\n, \xHH, ...) decoded.
std::string doc_separator(const std::string& typed);
// The files of --text / --tokens, for io::check_outputs_apart.
std::vector<io::NamedPath> input_paths(const TextInputs& in);

struct ExecFlags {
  std::string runtime_config;
  int64_t sort_cutoff = -1;  // -1: from the runtime config
  int64_t decode_max_tokens = -1;  // -1: from the runtime config
  int64_t small_batch_max_tokens = -1;  // -1: from the runtime config
};
void add_exec_options(CLI::App* sub, ExecFlags& f);
exec::RuntimeConfig resolve_runtime(const ExecFlags& f);

// "1,2,4" -> {1, 2, 4}, each in [1, max_value]; throws eq::Error naming `what`.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what, int64_t max_value);

}  // namespace eq::app

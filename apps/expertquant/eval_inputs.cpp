#include "eval_inputs.h"

#include <memory>
#include <limits>

#include "core/error.h"
#include "io/prompt_text.h"
#include "option_checks.h"

namespace eq::app {

void add_text_options(CLI::App* sub, eval::TextInputs& in, const std::string& max_tokens_help) {
  sub->add_option("--text", in.texts,
                  "Evaluation text (.zst ok), encoded by the model's tokenizer; repeat for several domains");
  sub->add_option("--tokens", in.token_files, "Evaluation token file (json, npy, u32, i32); repeatable");
  sub->add_option("--max-tokens", in.max_tokens, max_tokens_help)->check(integer_in(0, kMaxTokensOption));
  add_doc_separator_option(sub, in.doc_separator);
}

void add_doc_separator_option(CLI::App* sub, std::string& separator) {
  sub->add_option("--doc-separator", separator,
                  "Text files: documents end at this string (C escapes such as \\n decoded; dropped from the "
                  "text); each is encoded whole and no window crosses two (default: the file is one document)");
}

std::string doc_separator(const std::string& typed) { return io::unescape_prompt(typed); }

std::vector<io::NamedPath> input_paths(const eval::TextInputs& in) {
  std::vector<io::NamedPath> out;
  for (const auto& p : in.texts) out.push_back({"--text", p});
  for (const auto& p : in.token_files) out.push_back({"--tokens", p});
  return out;
}

void add_exec_options(CLI::App* sub, ExecFlags& f) {
  sub->add_option("--runtime-config", f.runtime_config,
                  "runtime.json with sort_cutoff (default: $EXPERTQUANT_RUNTIME_CONFIG, else the user's "
                  "$XDG_CONFIG_HOME/expertquant/runtime.json or ~/.config/expertquant/runtime.json as written by "
                  "tune, else the built-in defaults)");
  sub->add_option("--sort-cutoff", f.sort_cutoff, "auto dispatch sorts when M > this (overrides the runtime config)")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()));
  sub->add_option("--decode-max-tokens", f.decode_max_tokens,
                  "MoE calls of up to this many tokens run the decode expert-MLP kernel (int8 activations); 0 = "
                  "never (overrides the runtime config's mlp_kernels)")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()));
  sub->add_option("--small-batch-max-tokens", f.small_batch_max_tokens,
                  "MoE calls of more tokens than --decode-max-tokens and up to this many run the small-batch kernel "
                  "(the decode kernels on up to 4 rows of an expert per weight pass); larger calls run the batch "
                  "kernel (overrides the runtime config's mlp_kernels)")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()));
  sub->add_option("--device", f.device,
                  "Where the model runs: cpu (default) or cuda (a CUDA GPU: the packed experts are copied to it, "
                  "layer by layer as memory allows, and each decoder layer whose float matrices fit runs there whole, "
                  "a decode step's routing too, a prefill's on the CPU; auto dispatch uses the runtime config's "
                  "\"cuda\" sort cutoff)");
}

exec::RuntimeConfig resolve_runtime(const ExecFlags& f) {
  exec::RuntimeConfig r =
      f.runtime_config.empty() ? exec::default_runtime_config() : exec::load_runtime_config(f.runtime_config);
  r.device = quant::parse_device(f.device);
  if (f.sort_cutoff >= 0) {
    (r.device == quant::Device::kCuda ? r.cuda_sort_cutoff : r.sort_cutoff) = f.sort_cutoff;
    r.source = "--sort-cutoff";
  }
  if (f.decode_max_tokens >= 0) r.mlp_kernels.decode_max_tokens = f.decode_max_tokens;
  if (f.small_batch_max_tokens >= 0) r.mlp_kernels.small_batch_max_tokens = f.small_batch_max_tokens;
  return r;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what, int64_t max_value) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    const std::string item = text.substr(i, j - i);
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0 || v > max_value) throw 1;
      out.push_back(v);
    } catch (...) {
      invalid(what + ": '" + item + "' is not an integer in [1, " + std::to_string(max_value) +
              "] (expected a list like 1,2,4,8)");
    }
    i = j + 1;
  }
  return out;
}

}  // namespace eq::app

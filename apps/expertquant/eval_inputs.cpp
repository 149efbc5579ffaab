#include "eval_inputs.h"

#include <filesystem>
#include <memory>
#include <limits>

#include "core/error.h"
#include "io/prompt_text.h"
#include "io/tokens.h"
#include "option_checks.h"
#include "tokenizer/text_documents.h"

namespace eq::app {

void add_text_options(CLI::App* sub, TextInputs& in, const std::string& max_tokens_help) {
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

std::string domain_label(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".zst", ".txt", ".json", ".npy", ".u32", ".i32", ".bin"})
    if (name.size() > std::string(ext).size() && name.ends_with(ext)) name.resize(name.size() - std::string(ext).size());
  if (name.starts_with("eval_") && name.size() > 5) name = name.substr(5);
  return name;
}

std::vector<eval::LabeledTokens> read_inputs(const TextInputs& in, const std::string& model_folder, int64_t vocab_size) {
  std::vector<eval::LabeledTokens> out;
  auto cap = [&](std::vector<int32_t>& t) {
    if (in.max_tokens > 0 && static_cast<int64_t>(t.size()) > in.max_tokens) t.resize(static_cast<size_t>(in.max_tokens));
  };
  // A window scores every token after its first: fewer than 2 tokens score
  // nothing, and would report 0 bits rather than fail.
  auto require_window = [](const std::vector<int32_t>& t, const std::string& path) {
    if (t.size() < 2)
      invalid(path + ": " + (t.empty() ? std::string("empty") : "only 1 token") +
              ": too few tokens for one scored window (at least 2)");
  };
  if (!in.doc_separator.empty() && in.texts.empty())
    invalid("--doc-separator: applies to --text (the sequences of --tokens are its documents)");
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!in.texts.empty()) tok = tokenizer::load_tokenizer(model_folder, vocab_size);
  const tokenizer::TextDocumentOptions to{doc_separator(in.doc_separator), in.max_tokens};
  for (const std::string& p : in.texts) {
    eval::LabeledTokens t{domain_label(p), {}, {}};
    for (auto& d : tokenizer::read_text_documents(p, *tok, to).documents) {
      t.document_starts.push_back(static_cast<int64_t>(t.tokens.size()));
      t.tokens.insert(t.tokens.end(), d.begin(), d.end());
    }
    require_window(t.tokens, p);
    out.push_back(std::move(t));
  }
  for (const std::string& p : in.token_files) {
    io::TokenSequences seqs = io::read_token_file(p);
    io::check_token_range(seqs, vocab_size, p);
    eval::LabeledTokens t{domain_label(p), {}, {}};
    for (const auto& s : seqs.sequences) t.tokens.insert(t.tokens.end(), s.begin(), s.end());
    cap(t.tokens);
    require_window(t.tokens, p);
    out.push_back(std::move(t));
  }
  if (out.empty()) invalid("give evaluation input with --text FILE or --tokens FILE");
  return out;
}

std::vector<io::NamedPath> input_paths(const TextInputs& in) {
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
}

exec::RuntimeConfig resolve_runtime(const ExecFlags& f) {
  exec::RuntimeConfig r =
      f.runtime_config.empty() ? exec::default_runtime_config() : exec::load_runtime_config(f.runtime_config);
  if (f.sort_cutoff >= 0) {
    r.sort_cutoff = f.sort_cutoff;
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

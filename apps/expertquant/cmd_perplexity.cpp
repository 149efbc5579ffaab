// expertquant perplexity: perplexity and bits per token (bits per byte for
// byte-level models) of the float32 reference model over a text or token file,
// with the reference window rule (lib/eval/perplexity.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "eval/perplexity.h"
#include "eval_inputs.h"
#include "format_util.h"
#include "io/output_path.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "json_output.h"
#include "model/forward.h"
#include "option_checks.h"
#include "pass_options.h"
#include "progress.h"
#include "tokenizer/text_documents.h"

namespace eq::app {
namespace {

struct PerplexityCliOptions {
  std::string model, text, tokens, tokens_format = "auto", doc_separator;
  int64_t ctx = 512, batch = 4, max_tokens = 0;
  PassCliOptions pass;
  int threads = 0;
  JsonOutput json;
  bool verbose = false;
};

int run_perplexity(const PerplexityCliOptions& o) {
  io::check_outputs_apart({o.json.output()}, {{"--model", o.model}, {"--text", o.text}, {"--tokens", o.tokens}});
  apply_threads_option(o.threads);
  if (o.text.empty() == o.tokens.empty()) invalid("give exactly one of --text FILE or --tokens FILE");
  if (!o.doc_separator.empty() && o.text.empty())
    invalid("--doc-separator: applies to --text (the sequences of --tokens are its documents)");
  auto model = model::Model::open(o.model);
  const model::ModelConfig& c = model->config();

  io::TokenSequences input;
  const std::string& source = o.text.empty() ? o.tokens : o.text;
  if (!o.text.empty()) {
    const auto tok = tokenizer::load_tokenizer(model->checkpoint().folder(), c.vocab_size);
    input.sequences =
        tokenizer::read_text_documents(o.text, *tok, {doc_separator(o.doc_separator), o.max_tokens}).documents;
  } else {
    const auto format = io::parse_token_file_format(o.tokens_format);
    if (!format) invalid("--tokens-format: expected auto, json, npy, u32 or i32, got '" + o.tokens_format + "'");
    input = io::read_token_file(o.tokens, *format);
  }
  if (o.max_tokens > 0 && o.text.empty())
    for (auto& s : input.sequences)
      if (static_cast<int64_t>(s.size()) > o.max_tokens) s.resize(o.max_tokens);
  io::check_token_range(input, c.vocab_size, source);
  // Every window scores the tokens after its first: with no sequence of 2
  // tokens nothing is scored, and the result would read 0 bits.
  int64_t longest = 0;
  for (const auto& s : input.sequences) longest = std::max<int64_t>(longest, int64_t(s.size()));
  if (longest < 2)
    invalid(source + ": " + (longest == 0 ? std::string("empty") : "only 1 token per sequence") +
            ": too few tokens for one scored window (at least 2)");

  eval::PerplexityOptions po;
  po.ctx = o.ctx;
  po.batch_windows = o.batch;
  po.pass_order = o.pass.parsed_order();
  po.hidden_memory = o.pass.parsed_hidden_memory();
  Progress bar("perplexity", o.verbose);
  po.pass_progress = PassProgressView(bar, "");
  const eval::PerplexityResult r = eval::perplexity(*model, input.sequences, po);
  bar.finish();

  const char* unit = c.byte_level() ? "bits_per_byte" : "bits_per_token";
  if (!o.json.print) {
    std::printf("%s: %s scored tokens in %lld windows of up to %lld\n", source.c_str(),
                with_commas(static_cast<uint64_t>(r.scored_tokens)).c_str(), static_cast<long long>(r.windows),
                static_cast<long long>(o.ctx));
    std::printf("perplexity      %.4f\n", r.perplexity());
    std::printf("%-15s %.6f\n", c.byte_level() ? "bits per byte" : "bits per token", r.bits_per_token());
  }
  if (o.json.wanted()) {
    nlohmann::ordered_json j;
    j["model"] = o.model;
    j["input"] = source;
    j["ctx"] = o.ctx;
    j["windows"] = r.windows;
    j["tokens"] = r.tokens;
    j["scored_tokens"] = r.scored_tokens;
    j["total_bits"] = r.total_nats / std::log(2.0);
    j["perplexity"] = r.perplexity();
    j[unit] = r.bits_per_token();
    j["seconds"] = r.seconds;
    j["tokens_per_second"] = r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0;
    j["peak_rss_bytes"] = peak_rss_bytes();
    emit_json(o.json, j);
  }
  if (o.verbose) {
    const double ckpt = static_cast<double>(model->checkpoint().total_tensor_bytes());
    const double peak = static_cast<double>(peak_rss_bytes());
    std::fprintf(stderr,
                 "%.1f s (%.0f tokens/s), %d threads, float32 weights cached %s, checkpoint %s, peak RSS %s "
                 "(%.2fx the checkpoint)\n",
                 r.seconds, r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0, default_pool().size(),
                 human_bytes(static_cast<double>(model->weights().cached_bytes())).c_str(), human_bytes(ckpt).c_str(),
                 human_bytes(peak).c_str(), ckpt > 0 ? peak / ckpt : 0.0);
  }
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "perplexity", "Perplexity and bits per token (per byte for byte models) of the reference model");
  sub->add_option("--model", o->model, "Checkpoint folder or .safetensors file")->required();
  sub->add_option("--text", o->text, "Plain text (.zst ok), encoded by the model's tokenizer (bytes for a 256-token vocabulary)");
  sub->add_option("--tokens", o->tokens, "Token ids: JSON array (flat or per sequence), .npy, raw u32/i32");
  sub->add_option("--tokens-format", o->tokens_format, "auto (default), json, npy, u32, i32");
  sub->add_option("--ctx", o->ctx, "Window length: non-overlapping windows, first token of each not scored (512)")
      ->check(integer_in(2, kMaxCtx));
  sub->add_option("--batch", o->batch, "Windows run together per forward call (default 4)")
      ->check(integer_in(1, kMaxBatchWindows));
  add_doc_separator_option(sub, o->doc_separator);
  add_pass_options(sub, o->pass);
  sub->add_option("--max-tokens", o->max_tokens, "Use only the first N tokens of the text (of each sequence of a token file; 0 = all)")
      ->check(integer_in(0, kMaxTokensOption));
  add_threads_option(sub, o->threads);
  add_json_options(sub, o->json, "the result");
  sub->add_flag("-v,--verbose", o->verbose, "Timing, weight cache and peak memory on stderr");
  return {sub, [o] { return run_perplexity(*o); }};
}

}  // namespace eq::app

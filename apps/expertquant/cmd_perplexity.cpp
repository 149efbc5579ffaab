// expertquant perplexity: perplexity and bits per token (bits per byte for
// byte-level models) of the float32 reference model over a text or token file,
// with the reference window rule (lib/eval/perplexity.h).
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "eval/perplexity_run.h"
#include "eval_inputs.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "option_checks.h"
#include "pass_options.h"
#include "progress.h"

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
  eval::PerplexityRequest q;
  q.model = o.model;
  q.text = o.text;
  q.tokens = o.tokens;
  q.tokens_format = o.tokens_format;
  q.doc_separator = doc_separator(o.doc_separator);
  q.max_tokens = o.max_tokens;
  q.options.ctx = o.ctx;
  q.options.batch_windows = o.batch;
  q.options.pass_order = o.pass.parsed_order();
  q.options.hidden_memory = o.pass.parsed_hidden_memory();
  Progress bar("perplexity", o.verbose);
  q.options.pass_progress = PassProgressView(bar, "");
  const eval::PerplexityRun run = eval::run_perplexity(q);
  bar.finish();
  const eval::PerplexityResult& r = run.result;
  const std::string& source = run.input;

  const char* unit = run.byte_level ? "bits_per_byte" : "bits_per_token";
  if (!o.json.print) {
    std::printf("%s: %s scored tokens in %lld windows of up to %lld\n", source.c_str(),
                with_commas(static_cast<uint64_t>(r.scored_tokens)).c_str(), static_cast<long long>(r.windows),
                static_cast<long long>(o.ctx));
    std::printf("perplexity      %.4f\n", r.perplexity());
    std::printf("%-15s %.6f\n", run.byte_level ? "bits per byte" : "bits per token", r.bits_per_token());
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
    const double ckpt = static_cast<double>(run.checkpoint_bytes);
    const double peak = static_cast<double>(peak_rss_bytes());
    std::fprintf(stderr,
                 "%.1f s (%.0f tokens/s), %d threads, float32 weights cached %s, checkpoint %s, peak RSS %s "
                 "(%.2fx the checkpoint)\n",
                 r.seconds, r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0, default_pool().size(),
                 human_bytes(static_cast<double>(run.cached_weight_bytes)).c_str(), human_bytes(ckpt).c_str(),
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

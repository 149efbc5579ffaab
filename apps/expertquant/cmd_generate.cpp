// expertquant generate: continue a prompt with the reference model (--model)
// or a packed model (--packed, lib/exec), greedy or sampled.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "eval_inputs.h"
#include "exec/generation.h"
#include "io/output_path.h"
#include "io/prompt_text.h"
#include "json_output.h"
#include "model/generate.h"
#include "option_checks.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/text_documents.h"
#include "core/utf8.h"

namespace eq::app {
namespace {

struct GenerateCliOptions {
  std::string model, packed, prompt, prompt_file, tokens_file, dispatch = "auto";
  bool prompt_given = false;  // --prompt "" is an empty prompt, not none
  ExecFlags exec;
  model::GenerateOptions gen;
  int threads = 0;
  JsonOutput json;
  bool no_verify = false, raw_prompt = false;
};

int run_generate(GenerateCliOptions& o) {
  io::check_outputs_apart({o.json.output()}, {{"--model", o.model}, {"--packed", o.packed},
                                               {"--prompt-file", o.prompt_file}, {"--tokens", o.tokens_file},
                                               {"--runtime-config", o.exec.runtime_config}});
  apply_threads_option(o.threads);
  exec::GenerationRequest q;
  q.model = o.model;
  q.packed = o.packed;
  q.verify = !o.no_verify;
  if (!o.packed.empty()) {
    q.dispatch = exec::parse_dispatch_option(o.dispatch, /*list=*/false).front();
    q.runtime = resolve_runtime(o.exec);
  }
  // --prompt decodes C escapes ("import os\nimport"); --raw-prompt sends it byte for byte.
  if (o.prompt_given) q.prompt = o.raw_prompt ? o.prompt : io::unescape_prompt(o.prompt);
  q.prompt_file = o.prompt_file;
  q.tokens_file = o.tokens_file;
  const exec::Generation g = exec::prepare_generation(q);
  const std::unique_ptr<tokenizer::Tokenizer>& tok = g.tokenizer;
  const std::string dispatch_name = o.packed.empty() ? "reference" : o.dispatch;
  // Text is printed as it becomes final: bytes as they come, other
  // tokenizers' text through a DecodeStream; with no tokenizer, the ids once
  // complete.
  const bool print = !o.json.print && tok;
  const bool bytes = tok && tokenizer::is_byte_tokenizer(*tok);
  std::optional<tokenizer::DecodeStream> stream;
  if (print && !bytes) stream.emplace(*tok);
  const auto put = [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  const model::GenerateResult r = model::generate(*g.model, g.prompt, o.gen, [&](int32_t t) {
    if (print && bytes) put(std::string(1, static_cast<char>(t)));
    if (stream) put(stream->push(t));
  });
  if (!o.json.print) {
    if (stream) {
      put(stream->finish());
    } else if (!tok) {
      for (int32_t t : r.tokens) std::printf("%d ", t);
    }
    std::printf("\n");
    std::fprintf(stderr, "%lld prompt + %zu new tokens (%s); prefill %.1f tok/s, decode %.1f tok/s\n",
                 static_cast<long long>(r.prompt_tokens), r.tokens.size(), dispatch_name.c_str(),
                 r.prefill_tokens_per_second(), r.decode_tokens_per_second());
  }
  if (o.json.wanted()) {
    nlohmann::ordered_json j;
    j["model"] = o.model.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.model);
    j["packed"] = o.packed.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.packed);
    j["dispatch"] = dispatch_name;
    j["prompt_tokens"] = r.prompt_tokens;
    j["tokens"] = r.tokens;
    // JSON strings are UTF-8: bytes that are not become U+FFFD here (the ids are exact).
    j["text"] = tok ? nlohmann::ordered_json(valid_utf8(tok->decode(r.tokens, /*skip_special=*/false)))
                    : nlohmann::ordered_json(nullptr);
    j["prefill_tokens_per_second"] = r.prefill_tokens_per_second();
    j["decode_tokens_per_second"] = r.decode_tokens_per_second();
    emit_json(o.json, j);
  }
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateCliOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Continue a prompt with the reference model or a packed model");
  sub->add_option("--model", o->model,
                  "Checkpoint to run (with --packed: optional, the source, checked against the packed config)");
  sub->add_option("--packed", o->packed, "Run this packed model folder");
  auto* prompt = sub->add_option("--prompt", o->prompt,
                  "Prompt text, encoded by the model's tokenizer; C escapes such as \\n and \\xHH are decoded");
  sub->add_flag("--raw-prompt", o->raw_prompt, "Send --prompt byte for byte (no escape decoding)");
  sub->add_option("--prompt-file", o->prompt_file, "Prompt from a text file (.zst ok), encoded by the model's tokenizer");
  sub->add_option("--tokens", o->tokens_file, "Prompt token ids (json, npy, u32, i32; one sequence)");
  sub->add_option("-n,--max-new-tokens", o->gen.max_new_tokens, "Tokens to generate (default 32)")
      ->check(integer_in(0, kMaxStepTokens));
  sub->add_option("--temperature", o->gen.temperature, "0 = greedy (default)")
      ->check(number_in(0, HUGE_VAL));
  sub->add_option("--top-p", o->gen.top_p, "Nucleus sampling mass (default 1)")
      ->check(number_in(0, 1, /*lo_open=*/true));
  sub->add_option("--seed", o->gen.seed, "Sampling seed");
  sub->add_option("--dispatch", o->dispatch, "With --packed: mask-combine, sorted or auto (default)");
  add_exec_options(sub, o->exec);
  sub->add_flag("--no-verify", o->no_verify, "Skip checksum verification of the packed folder");
  add_json_options(sub, o->json, "the tokens, their text and speeds");
  add_threads_option(sub, o->threads);
  return {sub, [o, prompt] {
            o->prompt_given = prompt->count() > 0;
            return run_generate(*o);
          }};
}

}  // namespace eq::app

// expertquant eval: quality and latency of a packed model against the
// unquantized one (lib/eval), printed as tables and written as JSON / HTML.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/process_usage.h"
#include "core/thread_pool.h"
#include "eval/collapse.h"
#include "eval/latency.h"
#include "eval/quality.h"
#include "eval/report.h"
#include "eval_inputs.h"
#include "exec/moe_inputs.h"
#include "exec/packed_model.h"
#include "io/atomic_file.h"
#include "json_output.h"
#include "option_checks.h"
#include "pass_options.h"
#include "progress.h"

namespace eq::app {
namespace {

struct EvalCliOptions {
  std::string packed, model, baseline, html_out, sweep, dispatch = "mask-combine,sorted,auto";
  TextInputs inputs;
  ExecFlags exec;
  JsonOutput json;
  int64_t ctx = 512, batch_windows = 4;
  PassCliOptions pass;
  int reps = 5, warmup = 1, threads = 0;
  int64_t prompts_per_domain = 3, new_tokens = 96, prompt_tokens = 64;
  int64_t decode_tokens = 32, prefill_tokens = 256;
  bool no_verify = false, no_quality = false, no_collapse = false, no_latency = false, no_model_step = false;
  bool verbose = false, summary = false;
};

std::vector<std::shared_ptr<const exec::Dispatch>> make_dispatches(const std::string& list, int64_t cutoff) {
  std::vector<std::shared_ptr<const exec::Dispatch>> out;
  size_t i = 0;
  while (i <= list.size()) {
    const size_t j = std::min(list.find(',', i), list.size());
    const std::string name = list.substr(i, j - i);
    const auto kind = exec::parse_dispatch_kind(name);
    if (!kind) invalid("--dispatch: unknown strategy '" + name + "' (mask-combine, sorted, auto)");
    out.push_back(exec::make_dispatch(*kind, cutoff));
    i = j + 1;
  }
  return out;
}

eval::LatencyResult run_latency(exec::PackedModel& pm, const std::vector<eval::LabeledTokens>& texts,
                                const std::vector<std::shared_ptr<const exec::Dispatch>>& dispatches,
                                eval::LatencyOptions lo, const char* what, bool verbose) {
  const int64_t rows = *std::max_element(lo.sweep.begin(), lo.sweep.end());
  if (verbose) std::fprintf(stderr, "eval: capturing MoE inputs of %s (%lld rows)\n", what, static_cast<long long>(rows));
  const std::vector<int32_t>& text = texts.front().tokens;
  const exec::MoeInputs inputs = exec::capture_moe_inputs(pm, text, rows, lo.ctx);
  Progress bar(std::string("latency ") + what, verbose);
  bar.phase("", ProgressUnit::kMeasurements);
  lo.progress = [&](int64_t done, int64_t total, const std::string& step) {
    bar.update(static_cast<uint64_t>(done), static_cast<uint64_t>(total), step);
  };
  eval::LatencyResult r = eval::measure_latency(pm, inputs, text, dispatches, lo);
  bar.finish();
  return r;
}

// The human output: the tables, or with --summary the quality line and auto's speeds.
void print_report(const eval::EvalReport& r, const exec::RuntimeConfig& rt, bool summary) {
  if (!summary) {
    std::fputs(eval::report_table(r).c_str(), stdout);
    return;
  }
  std::printf("quality   %s\n", eval::quality_line(r).c_str());
  if (r.latency)
    for (const auto& s : r.latency->strategies)
      if (s.dispatch == "auto")
        std::printf("auto      decode %.1f tok/s, prefill %.1f tok/s (sort_cutoff %lld, from %s)\n",
                    s.decode_tokens_per_second, s.prefill_tokens_per_second, static_cast<long long>(s.sort_cutoff),
                    rt.source.c_str());
}

int run_eval(EvalCliOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<io::NamedPath> inputs = input_paths(o.inputs);
  inputs.insert(inputs.end(), {{"--packed", o.packed}, {"--model", o.model}, {"--baseline", o.baseline},
                               {"--runtime-config", o.exec.runtime_config}});
  io::check_outputs_apart({o.json.output(), {"--html", o.html_out}}, inputs);
  apply_threads_option(o.threads);
  // Checked before the models load: a bad list fails in a second, not after the quality pass.
  const std::vector<int64_t> sweep = o.sweep.empty() ? std::vector<int64_t>{} : parse_int_list(o.sweep, "--sweep", kMaxStepTokens);
  const exec::RuntimeConfig rt = resolve_runtime(o.exec);
  PhaseMeter meter;
  meter.start("load");
  exec::PackedModelOptions po;
  po.model_path = o.model;
  po.verify = !o.no_verify;
  po.verify_source_as_read = true;  // the quality pass and collapse checks read the source anyway
  auto pm = exec::PackedModel::open(o.packed, po);
  const model::ModelConfig& c = pm->config();
  pm->set_dispatch(exec::make_dispatch(exec::DispatchKind::kAuto, rt.sort_cutoff));
  pm->set_mlp_kernel_thresholds(rt.mlp_kernels);
  if (o.verbose)
    std::fprintf(stderr, "eval: loaded %s in %.2f s (%s verified); auto sort_cutoff %lld from %s\n", o.packed.c_str(),
                 pm->load_stats().seconds, format_bytes(pm->load_stats().verified_bytes).c_str(),
                 static_cast<long long>(rt.sort_cutoff), rt.source.c_str());
  const std::vector<eval::LabeledTokens> texts = read_inputs(o.inputs, o.packed, c.vocab_size);
  meter.stop();

  eval::EvalReport r;
  r.tool_version = EQ_VERSION;
  r.model_path = o.model;
  if (!pm->has_reference())
    r.comparison_skipped = "no --model: the packed model ran alone (its own bits per byte/token and latency); the "
                           "unquantized reference, KL, top-1, per-layer error and collapse checks need --model";
  r.machine = {std::string(cpu_model_name()), std::string(isa_name(active_isa())), default_pool().size(), 0};
  r.packed = eval::summarize_pack(pm->manifest(), o.packed);
  r.ctx = o.ctx;
  r.byte_level = c.byte_level();
  for (const auto& t : texts) r.texts.push_back(t.label);

  if (!o.no_quality) {
    // The total is the library's: the tokens it scores (every window's first
    // token predicts nothing), not every token of the texts.
    Progress bar("quality", o.verbose);
    eval::QualityOptions qo;
    qo.ctx = o.ctx;
    qo.batch_windows = o.batch_windows;
    qo.pass_order = o.pass.parsed_order();
    qo.hidden_memory = o.pass.parsed_hidden_memory();
    qo.pass_start = [&](const std::string& pass) { meter.start("quality " + pass); };
    // Two passes: the reference model's, then the packed model's.
    int passes = 0;
    double last = -1;
    qo.pass_progress = [&, view = std::optional<PassProgressView>()](const model::PassProgress& p) mutable {
      // Work done grows within a pass; it falls back when the next pass starts.
      const double now = double(p.layers_done) * double(p.tokens) + double(p.tokens_done);
      if (!view || now < last) view.emplace(bar, ++passes == 1 && pm->has_reference() ? "reference" : "packed");
      last = now;
      (*view)(p);
    };
    r.quality = eval::compare_quality(*pm, texts, qo);
    bar.finish();
    meter.stop();
  }
  if (!o.no_collapse && pm->has_reference()) {
    meter.start("collapse");
    eval::CollapseOptions co;
    co.prompts_per_domain = o.prompts_per_domain;
    co.new_tokens = o.new_tokens;
    co.prompt_tokens = o.prompt_tokens;
    r.collapse_thresholds = co.thresholds;
    Progress bar("collapse", o.verbose);
    bar.phase("", ProgressUnit::kTokens);
    co.progress = [&](int64_t done, int64_t total) { bar.update(uint64_t(done), uint64_t(total), "reference and packed greedy continuations"); };
    r.collapse = eval::run_collapse_checks(*pm, eval::domain_prompts(texts, co, c.byte_level()), co);
    bar.finish();
    meter.stop();
  }
  // Before anything is written: the figures above are only valid for the
  // checkpoint the folder was packed from.
  if (pm->has_reference()) {
    meter.start("source check");
    if (const uint64_t hashed = pm->finish_source_verification(); hashed > 0 && o.verbose)
      std::fprintf(stderr, "eval: --model %s matches the packed folder's source (%s hashed as read)\n",
                   o.model.c_str(), format_bytes(hashed).c_str());
    // The latency sweep runs the packed model alone: the source's converted
    // tensors and mapped pages would only add to its resident set.
    pm->drop_reference();
    meter.stop();
  }
  if (!o.no_latency) {
    meter.start("latency");
    eval::LatencyOptions lo;
    if (!sweep.empty()) lo.sweep = sweep;
    lo.reps = o.reps;
    lo.warmup = o.warmup;
    lo.model_step = !o.no_model_step;
    lo.ctx = o.ctx;
    lo.decode_tokens = o.decode_tokens;
    lo.prefill_tokens = o.prefill_tokens;
    const auto dispatches = make_dispatches(o.dispatch, rt.sort_cutoff);
    r.latency = run_latency(*pm, texts, dispatches, lo, "packed", o.verbose);
    if (!o.baseline.empty()) {
      exec::PackedModelOptions bo = po;
      bo.model_path.clear();  // timed only: no reference needed
      auto base = exec::PackedModel::open(o.baseline, bo);
      if (base->manifest().source.fingerprint != pm->manifest().source.fingerprint)
        invalid("--baseline " + o.baseline + ": packed from a different checkpoint than " + o.packed);
      r.baseline = eval::summarize_pack(base->manifest(), o.baseline);
      r.baseline_latency = run_latency(*base, texts, dispatches, lo, "baseline", o.verbose);
    }
    meter.stop();
  }
  r.phases = meter.phases();
  r.machine.peak_rss_bytes = meter.peak_rss_bytes();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!o.json.print) print_report(r, rt, o.summary);
  // --json-out and --html are one output: both files are replaced, or neither when a write fails.
  std::vector<io::FileText> html;
  if (!o.html_out.empty()) html.push_back({o.html_out, eval::report_html(r)});
  if (o.json.wanted())
    emit_json(o.json, eval::report_to_json(r), html);
  else if (!html.empty())
    io::write_files_atomic(html);
  return 0;
}

}  // namespace

Command add_eval(CLI::App& app) {
  auto o = std::make_shared<EvalCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Quality (bpb, KL, top-1, per-layer error, collapse) and latency per dispatch of a packed model");
  sub->add_option("--packed", o->packed, "Packed model folder (expertquant pack -o)")->required();
  sub->add_option("--model", o->model,
                  "Unquantized source checkpoint to compare against (without it: the packed model's own bpb and "
                  "latency; comparisons skipped)");
  add_text_options(sub, o->inputs, "Use at most N tokens of each text (0 = all)");
  sub->add_option("--ctx", o->ctx, "Window length for scoring (perplexity window rule; default 512)")
      ->check(integer_in(2, kMaxCtx));
  sub->add_option("--batch-windows", o->batch_windows, "Windows scored together (default 4)")
      ->check(integer_in(1, kMaxBatchWindows));
  add_pass_options(sub, o->pass);
  sub->add_option("--dispatch", o->dispatch, "Strategies to time, comma-separated (default mask-combine,sorted,auto)");
  add_exec_options(sub, o->exec);
  sub->add_option("--baseline", o->baseline, "A uniform pack of the same model, timed side by side");
  sub->add_option("--sweep", o->sweep, "Token counts M to time (default 1,2,4,...,1024)");
  sub->add_option("--reps", o->reps, "Timed repetitions per point (default 5)")
      ->check(integer_in(1, kMaxRepetitions));
  sub->add_option("--warmup", o->warmup, "Untimed warm-up runs per point (default 1)")
      ->check(integer_in(0, kMaxRepetitions));
  sub->add_option("--decode-tokens", o->decode_tokens, "Timed decode steps (default 32)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prefill-tokens", o->prefill_tokens, "Tokens of the timed prefill (default 256)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prompts-per-domain", o->prompts_per_domain, "Collapse-check prompts per text (default 3)")
      ->check(integer_in(0, 1000));
  sub->add_option("--new-tokens", o->new_tokens, "Greedy tokens per collapse check (default 96)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prompt-tokens", o->prompt_tokens, "Prompt length of a collapse check (default 64)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_flag("--no-quality", o->no_quality, "Skip bpb / KL / top-1 / per-layer error");
  sub->add_flag("--no-collapse", o->no_collapse, "Skip the collapse checks");
  sub->add_flag("--no-latency", o->no_latency, "Skip the latency sweep");
  sub->add_flag("--no-model-step", o->no_model_step, "Time MoE layers only, not whole forward steps");
  sub->add_flag("--no-verify", o->no_verify, "Skip checksum verification of the packed folder");
  add_json_options(sub, o->json, "the report (docs/report.md)");
  sub->add_option("--html", o->html_out, "Write a self-contained HTML report to FILE");
  add_threads_option(sub, o->threads);
  sub->add_flag("--summary", o->summary, "Print only the quality line and auto's decode/prefill speed");
  sub->add_flag("-v,--verbose", o->verbose, "Log each step on stderr");
  return {sub, [o] { return run_eval(*o); }};
}

}  // namespace eq::app

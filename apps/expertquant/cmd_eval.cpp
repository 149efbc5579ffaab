// expertquant eval: quality and latency of a packed model against the
// unquantized one (lib/eval/run.h), printed as tables and written as JSON / HTML.
#include <cstdio>
#include <memory>
#include <optional>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "eval/report.h"
#include "eval/run.h"
#include "eval_inputs.h"
#include "exec/packed_model.h"
#include "io/atomic_file.h"
#include "json_output.h"
#include "option_checks.h"
#include "pass_options.h"
#include "progress.h"

namespace eq::app {
namespace {

struct EvalCliOptions {
  eval::EvalRequest request;  // the options bound to its fields directly; the rest below
  std::string html_out, sweep;
  ExecFlags exec;
  JsonOutput json;
  PassCliOptions pass;
  int threads = 0;
  bool no_verify = false, no_quality = false, no_collapse = false, no_latency = false, no_model_step = false;
  bool verbose = false, summary = false;
};

// Draws each stage of the run as a progress bar; with -v, logs its steps.
class EvalProgress : public eval::EvalObserver {
 public:
  EvalProgress(const EvalCliOptions& o, const exec::RuntimeConfig& rt) : o_(o), rt_(rt) {}
  void on_loaded(const exec::PackedModel& pm) override {
    if (o_.verbose)
      std::fprintf(stderr, "eval: loaded %s in %.2f s (%s verified); experts on the %s, auto sort_cutoff %lld from %s\n",
                   o_.request.packed.c_str(), pm.load_stats().seconds, format_bytes(pm.load_stats().verified_bytes).c_str(),
                   rt_.device == quant::Device::kCuda ? "GPU" : "CPU",
                   static_cast<long long>(exec::active_sort_cutoff(rt_)), rt_.source.c_str());
  }
  void on_stage_start(eval::EvalStage stage, const std::string& model) override {
    view_.reset();
    switch (stage) {
      case eval::EvalStage::kQuality:
        // Its phases are the passes (on_pass_start).
        bar_.emplace("quality", o_.verbose);
        break;
      case eval::EvalStage::kCollapse:
        bar_.emplace("collapse", o_.verbose);
        bar_->phase("", ProgressUnit::kTokens);
        break;
      case eval::EvalStage::kLatency:
        bar_.emplace("latency " + model, o_.verbose);
        bar_->phase("", ProgressUnit::kMeasurements);
        break;
    }
  }
  void on_pass_start(const std::string& model) override { view_.emplace(*bar_, model); }
  void on_pass_progress(const model::PassProgress& p) override { (*view_)(p); }
  void on_progress(int64_t done, int64_t total, const std::string& step) override {
    bar_->update(static_cast<uint64_t>(done), static_cast<uint64_t>(total), step);
  }
  void on_stage_end() override { bar_->finish(); }
  void on_capturing(const std::string& model, int64_t rows) override {
    if (o_.verbose)
      std::fprintf(stderr, "eval: capturing MoE inputs of %s (%lld rows)\n", model.c_str(), static_cast<long long>(rows));
  }
  void on_source_verified(uint64_t hashed) override {
    if (o_.verbose)
      std::fprintf(stderr, "eval: --model %s matches the packed folder's source (%s hashed as read)\n",
                   o_.request.model.c_str(), format_bytes(hashed).c_str());
  }

 private:
  const EvalCliOptions& o_;
  const exec::RuntimeConfig& rt_;
  std::optional<Progress> bar_;
  std::optional<PassProgressView> view_;  // draws on bar_
};

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
  eval::EvalRequest& q = o.request;
  std::vector<io::NamedPath> inputs = input_paths(q.inputs);
  inputs.insert(inputs.end(), {{"--packed", q.packed}, {"--model", q.model}, {"--baseline", q.baseline},
                               {"--runtime-config", o.exec.runtime_config}});
  io::check_outputs_apart({o.json.output(), {"--html", o.html_out}}, inputs);
  apply_threads_option(o.threads);
  // Checked before the models load: a bad list fails in a second, not after the quality pass.
  if (!o.sweep.empty()) q.latency_options.sweep = parse_int_list(o.sweep, "--sweep", kMaxStepTokens);
  const exec::RuntimeConfig rt = resolve_runtime(o.exec);
  q.runtime = rt;
  q.verify = !o.no_verify;
  q.quality = !o.no_quality;
  q.collapse = !o.no_collapse;
  q.latency = !o.no_latency;
  q.latency_options.model_step = !o.no_model_step;
  q.pass_order = o.pass.parsed_order();
  q.hidden_memory = o.pass.parsed_hidden_memory();
  EvalProgress progress(o, rt);
  const eval::EvalReport r = eval::run_eval(q, &progress);

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
  sub->add_option("--packed", o->request.packed, "Packed model folder (expertquant pack -o)")->required();
  sub->add_option("--model", o->request.model,
                  "Unquantized source checkpoint to compare against (without it: the packed model's own bpb and "
                  "latency; comparisons skipped)");
  add_text_options(sub, o->request.inputs, "Use at most N tokens of each text (0 = all)");
  sub->add_option("--ctx", o->request.ctx, "Window length for scoring (perplexity window rule; default 512)")
      ->check(integer_in(2, kMaxCtx));
  sub->add_option("--batch-windows", o->request.batch_windows, "Windows scored together (default 4)")
      ->check(integer_in(1, kMaxBatchWindows));
  add_pass_options(sub, o->pass);
  sub->add_option("--dispatch", o->request.dispatch, "Strategies to time, comma-separated (default mask-combine,sorted,auto)");
  add_exec_options(sub, o->exec);
  sub->add_option("--baseline", o->request.baseline, "A uniform pack of the same model, timed side by side");
  sub->add_option("--sweep", o->sweep, "Token counts M to time (default 1,2,4,...,1024)");
  sub->add_option("--reps", o->request.latency_options.reps, "Timed repetitions per point (default 5)")
      ->check(integer_in(1, kMaxRepetitions));
  sub->add_option("--warmup", o->request.latency_options.warmup, "Untimed warm-up runs per point (default 1)")
      ->check(integer_in(0, kMaxRepetitions));
  sub->add_option("--decode-tokens", o->request.latency_options.decode_tokens, "Timed decode steps (default 32)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prefill-tokens", o->request.latency_options.prefill_tokens, "Tokens of the timed prefill (default 256)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prompts-per-domain", o->request.collapse_options.prompts_per_domain, "Collapse-check prompts per text (default 3)")
      ->check(integer_in(0, 1000));
  sub->add_option("--new-tokens", o->request.collapse_options.new_tokens, "Greedy tokens per collapse check (default 96)")
      ->check(integer_in(1, kMaxStepTokens));
  sub->add_option("--prompt-tokens", o->request.collapse_options.prompt_tokens, "Prompt length of a collapse check (default 64)")
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

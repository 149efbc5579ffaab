// expertquant tune: measure the sorted-vs-per-token crossover of auto
// dispatch on this machine for a packed model and write sort_cutoff
// (lib/exec/tune.h) to a runtime config: -o, else the user's
// (exec::default_runtime_config_path), never a file of the source tree.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "eval/tune_run.h"
#include "eval_inputs.h"
#include "exec/runtime_config.h"
#include "json_output.h"
#include "option_checks.h"
#include "progress.h"

namespace eq::app {
namespace {

struct TuneCliOptions {
  std::string packed, model, out, sweep;  // out: "" = the default location
  std::string device = "cpu";
  eval::TextInputs inputs;
  JsonOutput json;
  int reps = 7, warmup = 1, threads = 0;
  int64_t ctx = 512;
  bool no_verify = false, dry_run = false, verbose = false;
};

// The runtime config to write: -o, else the default location ("" with --dry-run).
std::string output_path(const TuneCliOptions& o) {
  if (o.dry_run) return {};
  if (!o.out.empty()) return o.out;
  const std::string path = exec::default_runtime_config_path();
  if (path.empty())
    invalid("-o: no default location for the runtime config ($XDG_CONFIG_HOME and $HOME are unset): give -o PATH");
  return path;
}

void print_gpu_table(const exec::TuneResult& r) {
  std::printf("%6s %14s %14s %9s\n", "M", "per-token ms", "sorted ms", "ratio");
  for (const auto& p : r.points)
    std::printf("%6lld %14.3f %14.3f %8.2fx%s\n", static_cast<long long>(p.m), p.per_token.median * 1e3,
                p.sorted.median * 1e3, p.sorted.median > 0 ? p.per_token.median / p.sorted.median : 0.0,
                p.m == r.sort_cutoff ? "  <- sort_cutoff" : "");
  std::printf("cuda sort_cutoff = %lld (on the GPU, auto sorts when M > %lld)\n", static_cast<long long>(r.sort_cutoff),
              static_cast<long long>(r.sort_cutoff));
}

void print_table(const exec::TuneResult& r) {
  if (r.config.device == quant::Device::kCuda) return print_gpu_table(r);
  std::printf("%6s %14s %14s %9s %12s %14s %12s\n", "M", "per-token ms", "sorted ms", "ratio", "decode ms",
              "small-batch ms", "batch ms");
  for (const auto& p : r.points)
    std::printf("%6lld %14.3f %14.3f %8.2fx %12.3f %14.3f %12.3f%s%s%s\n", static_cast<long long>(p.m),
                p.per_token.median * 1e3, p.sorted.median * 1e3,
                p.sorted.median > 0 ? p.per_token.median / p.sorted.median : 0.0, p.decode.median * 1e3,
                p.small_batch.median * 1e3, p.batch.median * 1e3, p.m == r.sort_cutoff ? "  <- sort_cutoff" : "",
                p.m == r.decode_max_tokens ? "  <- decode_max_tokens" : "",
                p.m == r.small_batch_max_tokens && p.m != r.decode_max_tokens ? "  <- small_batch_max_tokens" : "");
  std::printf("sort_cutoff = %lld (auto sorts when M > %lld)\n", static_cast<long long>(r.sort_cutoff),
              static_cast<long long>(r.sort_cutoff));
  std::printf("decode_max_tokens = %lld (the decode expert-MLP kernel runs when M <= %lld)\n",
              static_cast<long long>(r.decode_max_tokens), static_cast<long long>(r.decode_max_tokens));
  std::printf("small_batch_max_tokens = %lld (the small-batch kernel runs when %lld < M <= %lld, the batch kernel "
              "above)\n",
              static_cast<long long>(r.small_batch_max_tokens), static_cast<long long>(r.decode_max_tokens),
              static_cast<long long>(r.small_batch_max_tokens));
}

int run_tune(TuneCliOptions& o) {
  std::vector<io::NamedPath> read = input_paths(o.inputs);
  read.insert(read.end(), {{"--packed", o.packed}, {"--model", o.model}});
  const std::string out = output_path(o);
  io::check_outputs_apart({{"-o", out}, o.json.output()}, read);
  apply_threads_option(o.threads);
  eval::TuneRequest q;
  // Checked before the model loads: a bad list fails at once.
  if (!o.sweep.empty()) q.options.sweep = parse_int_list(o.sweep, "--sweep", kMaxStepTokens);
  q.packed = o.packed;
  q.model = o.model;
  q.verify = !o.no_verify;
  q.inputs = o.inputs;
  q.ctx = o.ctx;
  q.options.reps = o.reps;
  q.options.device = quant::parse_device(o.device);
  // A GPU tune replaces only the "cuda" section of the config it writes.
  if (q.options.device == quant::Device::kCuda && !out.empty() && std::filesystem::exists(out))
    q.options.base = exec::load_runtime_config(out);
  q.options.warmup = o.warmup;
  Progress bar("tune", o.verbose);
  q.measuring = [&] { bar.phase("", ProgressUnit::kMeasurements); };
  q.options.progress = [&](int64_t done, int64_t total, const std::string& step) {
    bar.update(static_cast<uint64_t>(done), static_cast<uint64_t>(total), step);
  };
  const exec::TuneResult r = eval::run_tune(q);
  bar.finish();

  if (!o.json.print) print_table(r);
  if (!out.empty()) {
    exec::write_runtime_config(r.config, out);
    if (!o.json.print) std::printf("wrote %s\n", out.c_str());
  }
  if (o.json.wanted())
    emit_json(o.json, {{"output", out.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(out)},
                       {"runtime_config", exec::runtime_config_to_json(r.config)}});
  return 0;
}

}  // namespace

Command add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneCliOptions>();
  CLI::App* sub = app.add_subcommand("tune", "Measure the sort/no-sort and decode/small-batch/batch kernel crossovers and write sort_cutoff, decode_max_tokens and small_batch_max_tokens");
  sub->add_option("--packed", o->packed, "Packed model folder")->required();
  sub->add_option("--model", o->model, "Source checkpoint (optional; checked against the packed config)");
  add_text_options(sub, o->inputs, "Use at most N tokens of the text (0 = all)");
  sub->add_option("-o,--out", o->out,
                  "Runtime config to write (default: $EXPERTQUANT_RUNTIME_CONFIG, else "
                  "$XDG_CONFIG_HOME/expertquant/runtime.json or ~/.config/expertquant/runtime.json)");
  sub->add_option("--device", o->device,
                  "cpu (default): the CPU's crossovers; cuda: the GPU's sort cutoff, written to the config's \"cuda\" "
                  "section (its other settings kept)");
  sub->add_option("--sweep", o->sweep, "Token counts M to time (default 1,2,4,...,256)");
  sub->add_option("--reps", o->reps, "Timed repetitions per point and branch (default 7)")
      ->check(integer_in(1, kMaxRepetitions));
  sub->add_option("--warmup", o->warmup, "Untimed warm-up runs per point (default 1)")
      ->check(integer_in(0, kMaxRepetitions));
  sub->add_option("--ctx", o->ctx, "Window length when reading the text (default 512)")
      ->check(integer_in(2, kMaxCtx));
  add_threads_option(sub, o->threads);
  sub->add_flag("--no-verify", o->no_verify, "Skip checksum verification of the packed folder");
  sub->add_flag("--dry-run", o->dry_run, "Print the measurement, write no runtime config");
  add_json_options(sub, o->json, "the runtime config and where it was written");
  sub->add_flag("-v,--verbose", o->verbose, "Log each step on stderr");
  return {sub, [o] { return run_tune(*o); }};
}

}  // namespace eq::app

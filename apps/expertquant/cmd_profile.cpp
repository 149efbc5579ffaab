// expertquant profile: calibration pass -> profile.json (lib/profile), or
// --merge of profiles of disjoint calibration slices.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "eval_inputs.h"
#include "format_util.h"
#include "io/atomic_file.h"
#include "io/output_path.h"
#include "json_output.h"
#include "model/config.h"
#include "option_checks.h"
#include "quant/device.h"
#include "profile/candidate_fit.h"
#include "profile/heatmap.h"
#include "profile/merge.h"
#include "profile/run.h"
#include "pass_options.h"
#include "progress.h"
#include "quant/format.h"

namespace eq::app {

namespace {

// The bits per weight of the widest registry format: a larger budget could not be spent.
double widest_format_bits() {
  double bits = 0;
  for (const auto& f : quant::all_formats()) bits = std::max(bits, f.bits_per_weight);
  return bits;
}

struct ProfileCliOptions {
  profile::ProfileRequest request;
  std::string calib, hidden, router_logits, policy, out, heatmap, target_size, doc_separator, slice;
  std::vector<std::string> merge;
  double target_bits = 0, max_pack_hours = 0;
  bool thresholds = false;
  int64_t min_tokens = -1;
  int threads = 0;
  JsonOutput json;
  PassCliOptions pass;
  bool no_sensitivity = false, summary = false, verbose = false, force = false;
  std::string device = "cpu", trellis_search = "half";
};

// "I/N" with 0 <= I < N.
void parse_slice(const std::string& text, int64_t& index, int64_t& count) {
  const size_t slash = text.find('/');
  const auto number = [&](const std::string& part, int64_t& out) {
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    out = std::stoll(part);
    return true;
  };
  if (slash == std::string::npos || !number(text.substr(0, slash), index) || !number(text.substr(slash + 1), count) ||
      count < 1 || index >= count)
    invalid("--slice: expected I/N with 0 <= I < N (e.g. 0/4), got '" + text + "'");
}

// "1.52M" weights per second.
std::string rate_text(double weights_per_second) {
  char b[32];
  if (weights_per_second >= 1e6) std::snprintf(b, sizeof b, "%.3gM", weights_per_second / 1e6);
  else std::snprintf(b, sizeof b, "%.3gK", weights_per_second / 1e3);
  return b;
}

// The predicted pack time of the allocation, the limit, and the rates it rests on.
void print_pack_time(const profile::Profile& p) {
  const auto& c = p.classification;
  std::printf("predicted pack time %.1f s on %d thread(s), quantizing only (%s rates of one thread:", 
              c.predicted_pack_seconds, p.pack_rates.threads, p.pack_rates.device.c_str());
  for (const auto& [format, rate] : p.pack_rates.per_thread)
    std::printf(" %s %s", format.c_str(), rate_text(rate).c_str());
  std::printf(" weights/s)");
  if (c.max_pack_seconds > 0) std::printf("; limit %.1f s", c.max_pack_seconds);
  std::printf("\n");
}

std::string bits_or_dash(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

void print_summary(const profile::Profile& p) {
  const auto& s = p.stats;
  const auto metrics = profile::expert_metrics(s, p.policy);
  const model::ModelConfig dims = p.dims();
  std::printf("%-6s %10s %5s %5s %5s %5s %8s %9s %6s %10s\n", "layer", "tokens", "crit", "std", "depr", "prun",
              "bits/w", "covered", "never", "max share");
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const auto& ls = s.layers[li];
    int64_t counts[4] = {}, covered = 0, never = 0;
    uint64_t bytes = 0;
    double max_share = 0;
    for (size_t e = 0; e < ls.experts.size(); ++e) {
      const auto& d = p.classification.layers[li][e];
      ++counts[int(d.cls)];
      bytes += profile::expert_bytes(dims, d.format);
      covered += !metrics[li][e].under_covered;
      never += ls.experts[e].tokens == 0;
      max_share = std::max(max_share, metrics[li][e].share);
    }
    const double bits = 8.0 * double(bytes) / double(3 * s.hidden * s.intermediate * s.num_experts);
    std::printf("%-6lld %10s %5lld %5lld %5lld %5lld %8s %4lld/%-4lld %6lld %9.2f%%\n", (long long)ls.layer,
                with_commas(uint64_t(ls.tokens)).c_str(), (long long)counts[0], (long long)counts[1],
                (long long)counts[2], (long long)counts[3], bits_or_dash(bits).c_str(), (long long)covered,
                (long long)s.num_experts, (long long)never, 100 * max_share);
  }
  const auto& c = p.classification;
  int64_t t[4] = {};
  for (const auto& row : c.layers)
    for (const auto& d : row) ++t[int(d.cls)];
  std::printf("%-6s %10s %5lld %5lld %5lld %5lld %8s\n", "total", "", (long long)t[0], (long long)t[1],
              (long long)t[2], (long long)t[3], bits_or_dash(c.avg_bits).c_str());
  std::printf("\nmode %s", c.mode.c_str());
  if (c.mode == "budget") std::printf(" (target %.3f bits)", c.target_bits);
  std::printf(": %.3f bits per expert weight, expert bytes %s", c.avg_bits, human_bytes(double(c.expert_bytes)).c_str());
  if (!std::isnan(c.predicted_error)) std::printf(", predicted error %.4g", c.predicted_error);
  // The class formats the experts got: the policy's, or their replacements.
  const profile::CandidateFit fit = profile::fit_policy(p.policy, s.hidden, s.intermediate);
  std::printf("\nformats chosen: %s\n", describe_format_mix(c.format_mix).c_str());
  print_pack_time(p);
  std::printf("class formats: critical %s, standard %s, deprioritized %s; pass %.2f s, sensitivity %.2f s\n",
              fit.policy.class_format[0].c_str(), fit.policy.class_format[1].c_str(),
              fit.policy.class_format[2].c_str(), p.seconds_pass, p.seconds_sensitivity);
  for (const std::string& line : profile::describe_fit(fit, s.layers.size())) std::printf("%s\n", line.c_str());
  for (const std::string& f : p.lossless_formats)
    std::printf("source: %s stores every routed expert's bits as the checkpoint does (lossless)%s\n", f.c_str(),
                p.policy.lossless_source_formats ? ": candidate at error 0 and the standard class"
                                                 : "; not adopted (policy lossless_source_formats: false)");
  for (const auto& f : p.sensitivity.proxy_fits) std::printf("%s\n", profile::describe_proxy_fit(f).c_str());
  for (const std::string& line : c.budget_notes) std::printf("%s\n", line.c_str());
}

nlohmann::ordered_json summary_json(const profile::Profile& p, const std::string& out) {
  nlohmann::ordered_json full = profile::profile_to_json(p);
  nlohmann::ordered_json j;
  j["output"] = out;
  j["calibration"] = full["calibration"];
  j["timing"] = full["timing"];
  j["classification"] = full["classification"];
  j["format_mix"] = p.classification.format_mix.json();
  nlohmann::ordered_json pack_time;
  pack_time["predicted_seconds"] = p.classification.predicted_pack_seconds;
  pack_time["max_seconds"] = p.classification.max_pack_seconds > 0 ? nlohmann::ordered_json(p.classification.max_pack_seconds)
                                                                   : nlohmann::ordered_json(nullptr);
  pack_time["rates"] = p.pack_rates.json();
  j["pack_time"] = pack_time;
  std::vector<int64_t> layer_ids;
  for (const auto& l : p.stats.layers) layer_ids.push_back(l.layer);
  j["format_fit"] =
      profile::fit_to_json(profile::fit_policy(p.policy, p.stats.hidden, p.stats.intermediate), layer_ids);
  j["guard_rails_bound"] = p.classification.budget_notes;
  j["sensitivity_proxy_fits"] = full["sensitivity_proxy_fits"];
  j["lossless_source_formats"] = full["lossless_source_formats"];
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& l : full["layers"])
    layers.push_back({{"layer", l["layer"]}, {"tokens", l["tokens"]}, {"class_counts", l["class_counts"]},
                      {"coverage", l["coverage"]}});
  j["layers"] = layers;
  return j;
}

// The human output: the --summary table, the trace sizes, what was written.
void print_result(const profile::Profile& p, const profile::ProfileRunInfo& info, const ProfileCliOptions& o) {
  if (o.summary) {
    print_summary(p);
    // Shared experts are a class of their own: every token runs them, so
    // they are never classified, allocated or pruned (pack --shared-format).
    // (--merge reads no model: its profiles' experts are the routed ones.)
    const model::ModelConfig c =
        o.request.model_path.empty() ? model::ModelConfig{} : model::load_config(o.request.model_path);
    if (c.shared_expert_intermediate_size > 0)
      std::printf("shared experts: 1 per MoE layer x %lld layers, intermediate %lld%s: always active, "
                  "never pruned; pack --shared-format sets their format\n",
                  (long long)c.num_moe_layers(), (long long)c.shared_expert_intermediate_size,
                  c.shared_expert_gated ? ", sigmoid-gated" : "");
  }
  if (info.trace_raw_bytes)
    std::printf("trace %s: %s -> %s (zstd ratio %.2f)\n", o.request.save_trace.c_str(),
                human_bytes(double(info.trace_raw_bytes)).c_str(),
                human_bytes(double(info.trace_compressed_bytes)).c_str(),
                double(info.trace_raw_bytes) / double(std::max<uint64_t>(1, info.trace_compressed_bytes)));
  std::printf("wrote %s%s%s\n", o.out.c_str(), p.importance_file.empty() ? "" : " and ",
              p.importance_file.c_str());
}

}  // namespace

Command add_profile(CLI::App& app) {
  auto o = std::make_shared<ProfileCliOptions>();
  CLI::App* sub = app.add_subcommand("profile", "Measure expert usage and quantization sensitivity, classify experts");
  sub->add_option("--model", o->request.model_path, "Checkpoint folder");
  auto* calib = sub->add_option("--calib", o->calib,
                                "Calibration text (.zst ok; encoded by the model's tokenizer) or token ids "
                                "(.json/.npy/.u32/.i32/.bin, or --tokens-format)");
  auto* hidden = sub->add_option("--hidden", o->hidden, "Captured router inputs: safetensors with moe_input.L");
  auto* logits = sub->add_option("--router-logits", o->router_logits,
                                 "router_logits.L safetensors, or a --save-trace .zst (usage only)");
  auto* merge = sub->add_option("--merge", o->merge, "Merge profiles of disjoint calibration slices")->expected(1, -1);
  calib->excludes(hidden, logits, merge);
  hidden->excludes(logits, merge);
  logits->excludes(merge);
  sub->add_option("-o,--out", o->out, "Output profile.json (written atomically)")->required();
  sub->add_flag("--force", o->force, "Replace an existing -o file (and its sidecar)");
  sub->add_option("--ctx", o->request.ctx, "Calibration window length in tokens (default 512)")
      ->check(integer_in(1, kMaxCtx));
  sub->add_option("--max-tokens", o->request.max_tokens, "Use at most this many calibration tokens")
      ->check(integer_in(0, kMaxTokensOption));
  auto* slice = sub->add_option("--slice", o->slice,
                                "I/N: profile only slice I (0-based) of N equal runs of --calib's windows; "
                                "profiles of disjoint slices --merge into the whole");
  auto* skip = sub->add_option("--skip-tokens", o->request.skip_tokens,
                               "Skip this many calibration tokens first (whole windows; with --max-tokens: a slice)")
                   ->check(integer_in(0, kMaxTokensOption));
  slice->excludes(hidden, logits, merge);
  skip->excludes(hidden, logits, merge);
  sub->add_option("--tokens-format", o->request.tokens_format,
                  "auto (token ids when --calib's name ends in .json/.npy/.u32/.i32/.bin, text otherwise), json, npy, "
                  "u32, i32");
  add_doc_separator_option(sub, o->doc_separator);
  sub->add_option("--policy", o->policy, "Policy file (configs/*.json; default: the built-in configs/default.json)");
  sub->add_option("--min-tokens", o->min_tokens, "Experts routed fewer times are under-covered (overrides the policy)")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()));
  auto* tb = sub->add_option("--target-bits", o->target_bits, "Bit budget: average bits per expert weight")
                ->check(number_in(0, widest_format_bits(), /*lo_open=*/true));
  auto* ts = sub->add_option("--target-size", o->target_size, "Bit budget: total expert bytes (512M, 4G, ...)");
  tb->excludes(ts);
  auto* th = sub->add_flag("--thresholds", o->thresholds,
                           "Classify by the policy's thresholds instead of its default bit budget");
  th->excludes(tb, ts);
  sub->add_option("--max-pack-hours", o->max_pack_hours,
                  "Limit the bit budget's predicted pack time on this machine (hours; 0.01 = 36 s)")
      ->check(number_in(0, 1e6, /*lo_open=*/true))
      ->excludes(th);
  sub->add_flag("--no-sensitivity", o->no_sensitivity, "Skip the sensitivity measurement (usage statistics only)");
  sub->add_option("--device", o->device,
                  "Where the sensitivity measurement quantizes: cpu (default), cuda (every visible GPU) or cuda:0,1; exit 4 "
                  "without a GPU");
  sub->add_option("--trellis-search", o->trellis_search,
                  "The GPU's trellis search: half (default; FP16, MSE within 0.5%) or exact (the CPU's bit for bit)");
  sub->add_option("--save-trace", o->request.save_trace, "Write the per-token routing, zstd-compressed");
  sub->add_option("--heatmap", o->heatmap, "Write an SVG heatmap of layers x experts");
  add_pass_options(sub, o->pass);
  sub->add_flag("--summary", o->summary, "Print the per-layer table");
  add_json_options(sub, o->json, "a summary");
  add_threads_option(sub, o->threads);
  sub->add_flag("-v,--verbose", o->verbose, "Log progress on stderr even when it is not a terminal");
  return {sub, [o, slice] {
            // Before any work: no output may replace or sit inside an input.
            std::vector<io::NamedPath> inputs{{"--model", o->request.model_path}, {"--calib", o->calib},
                                              {"--hidden", o->hidden}, {"--router-logits", o->router_logits},
                                              {"--policy", o->policy}};
            for (const auto& f : o->merge) inputs.push_back({"--merge", f});
            io::check_outputs_apart({{"-o", o->out},
                                     {"-o's sidecar", profile::sidecar_path(o->out)},
                                     {"--heatmap", o->heatmap},
                                     {"--save-trace", o->request.save_trace},
                                     o->json.output()},
                                    inputs);
            io::check_replace_allowed({"-o", o->out}, o->force);
            apply_threads_option(o->threads);
            uint64_t target_bytes = 0;
            if (!o->target_size.empty()) target_bytes = parse_byte_size(o->target_size, "--target-size");
            profile::Profile p;
            profile::ProfileRunInfo info;
            if (!o->merge.empty()) {
              p = profile::merge_and_classify(
                  {o->merge, o->policy, o->min_tokens, o->target_bits, target_bytes, o->thresholds, o->max_pack_hours * 3600.0});
            } else {
              auto& r = o->request;
              if (r.model_path.empty()) invalid("profile: --model is required (or use --merge)");
              const int sources = !o->calib.empty() + !o->hidden.empty() + !o->router_logits.empty();
              if (sources != 1) invalid("profile: give exactly one of --calib, --hidden, --router-logits");
              if (!o->calib.empty()) r.source = profile::SourceKind::kCalib, r.input_path = o->calib;
              if (!o->hidden.empty()) r.source = profile::SourceKind::kHidden, r.input_path = o->hidden;
              if (!o->router_logits.empty()) r.source = profile::SourceKind::kRouterLogits, r.input_path = o->router_logits;
              if (slice->count() > 0) parse_slice(o->slice, r.slice_index, r.slice_count);  // '' too
              r.policy = o->policy.empty() ? profile::default_policy() : profile::load_policy(o->policy);
              r.min_tokens = o->min_tokens;
              r.doc_separator = doc_separator(o->doc_separator);
              r.sensitivity = !o->no_sensitivity;
              r.device = quant::parse_device(o->device);
              r.trellis_search = quant::parse_trellis_search(o->trellis_search);
              r.budget = {o->target_bits, target_bytes};
              r.budget.max_pack_seconds = o->max_pack_hours * 3600.0;
              r.thresholds = o->thresholds;
              // Phases: "pass" counts tokens, "sensitivity" experts.
              Progress bar("profile", o->verbose);
              std::string phase;
              PassProgressView pass_view(bar, "pass");
              // The layer order measures sensitivity after each layer, inside
              // the pass: shown as the pass's step, timed between pass updates.
              // The window order measures it after the pass: a phase of its own.
              double sensitivity_seconds = 0;
              auto last_event = std::chrono::steady_clock::now();
              r.progress = [&](const std::string& name, int64_t d, int64_t t) {
                if (name == "sensitivity") {
                  const auto now = std::chrono::steady_clock::now();
                  sensitivity_seconds += std::chrono::duration<double>(now - last_event).count();
                  last_event = now;
                  if (pass_view.show_step(
                          side_work_step(name, ProgressUnit::kExperts, uint64_t(d), uint64_t(t), sensitivity_seconds)))
                    return;
                }
                if (name != phase) bar.phase(phase = name, name == "pass" ? ProgressUnit::kTokens : ProgressUnit::kExperts);
                bar.update(uint64_t(d), uint64_t(t));
              };
              r.pass_order = o->pass.parsed_order();
              r.hidden_memory = o->pass.parsed_hidden_memory();
              // Spilled hidden states go beside the output.
              r.spill_dir = std::filesystem::path(o->out).parent_path().string();
              if (r.spill_dir.empty()) r.spill_dir = ".";
              r.pass_progress = [&](const model::PassProgress& pp) {
                last_event = std::chrono::steady_clock::now();
                pass_view(pp);
              };
              p = profile::run_profile(r, &info);
              bar.finish();
            }
            // profile.json, its sidecar and the heatmap: all replaced, or none when a write fails.
            std::vector<io::FileText> also;
            if (!o->heatmap.empty()) also.push_back({o->heatmap, profile::heatmap_svg(p)});
            profile::write_profile(p, o->out, also);
            if (!o->json.print) print_result(p, info, *o);
            if (o->json.wanted()) {
              auto j = summary_json(p, o->out);
              if (info.trace_raw_bytes)
                j["trace"] = {{"path", o->request.save_trace}, {"raw_bytes", info.trace_raw_bytes},
                              {"compressed_bytes", info.trace_compressed_bytes}};
              emit_json(o->json, j);
            }
            return 0;
          }};
}

}  // namespace eq::app

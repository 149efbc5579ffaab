// expertquant pack: checkpoint + allocation -> packed folder (lib/pack).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "option_checks.h"
#include "pack/format_tally.h"
#include "pack/packer.h"
#include "profile/profile.h"
#include "quant/device.h"
#include "progress.h"

namespace eq::app {

namespace {

struct PackCliOptions {
  pack::PackRequest request;
  std::string layers, max_memory, shard_size = "4G", device = "cpu", trellis_search = "half";
  int threads = 0;
  JsonOutput json;
  bool verbose = false;
};

class BarObserver : public pack::PackObserver {
 public:
  explicit BarObserver(bool verbose) : verbose_(verbose), bar_("pack", verbose) {}
  void on_plan(const pack::PackPlan& plan, uint64_t work) override {
    work_ = work;
    bar_.phase("", ProgressUnit::kBytes);
    if (verbose_)
      std::fprintf(stderr, "pack: %zu layers, %zu tensors in %d shard(s), %d thread(s), estimated peak %s above baseline\n",
                   plan.layers.size(), plan.tensors.size(), plan.num_shards, plan.threads,
                   format_bytes(plan.estimated_peak).c_str());
  }
  void on_progress(uint64_t done, const std::string& what) override { bar_.update(done, work_, what); }
  void on_phases(const pack::PackPhases& phases) override {
    if (!verbose_) return;
    std::string line = "pack phases:";
    for (const auto& e : phases.entries) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %.2f%s;", e.name.c_str(), e.seconds, e.thread_seconds ? " thread-s" : " s");
      line += buf;
    }
    line.back() = '\n';
    std::fputs(line.c_str(), stderr);
  }
  void finish() { bar_.finish(); }

 private:
  bool verbose_;
  uint64_t work_ = 0;
  Progress bar_;
};

void parse_layers(const std::string& text, pack::PackRequest& r) {
  const size_t dash = text.find('-');
  try {
    size_t used = 0;
    if (dash == std::string::npos) {
      r.first_layer = r.last_layer = std::stoll(text, &used);
      if (used != text.size()) throw 1;
    } else {
      r.first_layer = std::stoll(text.substr(0, dash), &used);
      if (used != dash) throw 1;
      const std::string b = text.substr(dash + 1);
      r.last_layer = std::stoll(b, &used);
      if (used != b.size()) throw 1;
    }
  } catch (...) {
    invalid("--layers: '" + text + "' is not A-B or A (layer numbers)");
  }
  if (r.first_layer < 0 || r.last_layer < r.first_layer) invalid("--layers: '" + text + "' is not an ascending range");
}

void print_summary(const pack::Manifest& m, const std::string& out, uint64_t final_peak) {
  std::printf("%-6s %5s %5s %5s %5s %6s %9s %12s %12s\n", "layer", "crit", "std", "depr", "prun", "groups",
              "bits/w", "before", "after");
  for (const auto& l : m.layers) {
    const auto& c = l.counts;
    std::printf("%-6lld %5lld %5lld %5lld %5lld %6zu %9.3f %12s %12s\n", (long long)l.layer,
                (long long)c.class_counts[0], (long long)c.class_counts[1], (long long)c.class_counts[2],
                (long long)c.class_counts[3], l.groups.size(), c.avg_bits_per_expert_weight(),
                human_bytes(double(c.bytes_before)).c_str(), human_bytes(double(c.bytes_after)).c_str());
  }
  const auto& t = m.totals;
  std::printf("%-6s %5lld %5lld %5lld %5lld %6s %9.3f %12s %12s\n", "total", (long long)t.class_counts[0],
              (long long)t.class_counts[1], (long long)t.class_counts[2], (long long)t.class_counts[3], "",
              t.avg_bits_per_expert_weight(), human_bytes(double(t.bytes_before)).c_str(),
              human_bytes(double(t.bytes_after)).c_str());
  const double saved = double(t.bytes_before) - double(t.bytes_after);
  std::printf("\nexpert weights %s -> %s; all tensors %s -> %s (saved %s, %.1f%%)\n",
              human_bytes(double(t.expert_bytes_before)).c_str(), human_bytes(double(t.expert_bytes_after)).c_str(),
              human_bytes(double(t.bytes_before)).c_str(), human_bytes(double(t.bytes_after)).c_str(),
              human_bytes(saved).c_str(), t.bytes_before ? 100.0 * saved / double(t.bytes_before) : 0.0);
  std::printf("formats: %s\n", describe_format_mix(pack::format_mix(m)).c_str());
  std::printf("peak memory %s above a %s baseline (VmHWM %s; bound %s); %.2f s, %d thread(s)\n",
              human_bytes(double(final_peak - std::min(final_peak, m.packing.baseline_rss_bytes))).c_str(),
              human_bytes(double(m.packing.baseline_rss_bytes)).c_str(), human_bytes(double(final_peak)).c_str(),
              human_bytes(double(m.packing.max_memory_bytes)).c_str(), m.packing.seconds, m.packing.threads);
  std::printf("wrote %s (%zu shard(s), manifest.json)\n", out.c_str(), m.shards.size());
}

}  // namespace

static nlohmann::ordered_json pack_summary_json(const pack::Manifest& m, const std::string& out, uint64_t final_peak) {
  nlohmann::ordered_json full = pack::manifest_to_json(m);
  nlohmann::ordered_json j;
  j["output"] = out;
  j["layer_range"] = full["layer_range"];
  j["totals"] = full["totals"];
  j["format_mix"] = pack::format_mix(m).json();
  j["packing"] = full["packing"];
  // VmHWM at exit (includes writing the manifest), the figure the bound is checked against.
  j["packing"]["final_peak_rss_bytes"] = final_peak;
  j["packing"]["final_peak_above_baseline_bytes"] = final_peak - std::min(final_peak, m.packing.baseline_rss_bytes);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& l : full["layers"]) layers.push_back({{"layer", l["layer"]}, {"totals", l["totals"]}});
  j["layers"] = layers;
  return j;
}

Command add_pack(CLI::App& app) {
  auto o = std::make_shared<PackCliOptions>();
  CLI::App* sub = app.add_subcommand("pack", "Quantize each expert to its allocated format, one bit group at a time");
  sub->footer(formats_help_footer());
  sub->add_option("--model", o->request.model_path, "Source checkpoint folder")->required();
  sub->add_option("-o,--out", o->request.out_path, "Output folder (staged beside it, renamed when complete)")
      ->required();
  auto* uni = sub->add_option("--uniform", o->request.uniform_format, "Every expert in this registry format");
  auto* alloc = sub->add_option("--allocation", o->request.allocation_path, "Allocation file (docs/allocation.md)");
  auto* prof = sub->add_option("--profile", o->request.profile_path,
                               "profile.json: its allocation and importance_file");
  uni->excludes(alloc, prof);
  alloc->excludes(prof);
  sub->add_option("--attn-format", o->request.attn_format, "Also quantize attention projections and lm_head");
  sub->add_option("--shared-format", o->request.shared_format,
                  "Quantize shared experts (never routed, never pruned) to this format; default: the profile "
                  "policy's shared_expert_format, else copied as stored");
  sub->add_option("--dense-format", o->request.dense_format,
                  "Quantize the dense MLPs of the non-MoE layers to this format; default: the profile policy's "
                  "dense_mlp_format, else copied as stored");
  sub->add_option("--layers", o->layers, "Pack only layers A-B (inclusive), for `expertquant merge`");
  sub->add_option("--max-memory", o->max_memory,
                  "Bound on memory above the process baseline (bytes, or 512M, 4G; default half the RAM)");
  sub->add_option("--shard-size", o->shard_size, "Maximum bytes per output shard (default 4G)");
  sub->add_option("--device", o->device,
                  "Where to quantize: cpu (default), cuda (every visible GPU) or cuda:0,1 (those GPUs); exit 4 without a GPU");
  sub->add_option("--trellis-search", o->trellis_search,
                  "The GPU's trellis search: half (default; FP16, MSE within 0.5%) or exact (the CPU's bit for bit)");
  add_threads_option(sub, o->threads);
  sub->add_flag("--force", o->request.force, "Replace an existing output folder");
  add_json_options(sub, o->json, "the totals, per-layer totals and packing figures");
  sub->add_flag("-v,--verbose", o->verbose, "Log each step on stderr even when it is not a terminal");
  return {sub, [o] {
            const auto& r = o->request;
            io::check_outputs_apart({{"-o", r.out_path}, o->json.output()}, {{"--model", r.model_path},
                                                          {"--allocation", r.allocation_path},
                                                          {"--profile", r.profile_path},
                                                          {"--profile's sidecar", r.profile_path.empty() ? "" : profile::sidecar_path(r.profile_path)}});
            if (!o->layers.empty()) parse_layers(o->layers, o->request);
            if (!o->max_memory.empty()) o->request.max_memory = parse_byte_size(o->max_memory, "--max-memory");
            o->request.shard_size = parse_byte_size(o->shard_size, "--shard-size");
            o->request.device = quant::parse_device(o->device);
            o->request.trellis_search = quant::parse_trellis_search(o->trellis_search);
            apply_threads_option(o->threads);
            BarObserver observer(o->verbose);
            pack::Manifest m = pack::run_pack(o->request, &observer);
            observer.finish();
            const uint64_t final_peak = peak_rss_bytes();
            if (!o->json.print) print_summary(m, o->request.out_path, final_peak);
            if (o->json.wanted()) emit_json(o->json, pack_summary_json(m, o->request.out_path, final_peak));
            return 0;
          }};
}

}  // namespace eq::app

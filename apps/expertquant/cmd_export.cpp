// expertquant export: a checkpoint with the least salient experts removed, in
// the source's HF layout, for other engines (lib/prune, docs/prune.md).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/memory.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "progress.h"
#include "prune/export.h"

namespace eq::app {

namespace {

struct ExportCliOptions {
  prune::ExportRequest request;
  double prune_fraction = 0;
  int64_t keep_experts = 0;
  std::string rank_by = "reap", shard_size = "4G";
  bool summary = false, verbose = false;
  JsonOutput json;
};

class ExportBarObserver : public prune::ExportObserver {
 public:
  explicit ExportBarObserver(bool verbose) : bar_("export", verbose) {}
  void on_start(const prune::Selection&, uint64_t total) override {
    total_ = total;
    bar_.phase("", ProgressUnit::kBytes);
  }
  void on_progress(uint64_t done, const std::string& what) override { bar_.update(done, total_, what); }
  void finish() { bar_.finish(); }

 private:
  uint64_t total_ = 0;
  Progress bar_;
};

std::string export_id_list(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t e : ids) s += (s.empty() ? "" : ",") + std::to_string(e);
  return s.empty() ? "-" : s;
}

void print_export_table(const prune::ExportSummary& s) {
  std::printf("%-6s %5s %7s %10s %10s  %s\n", "layer", "kept", "dropped", "usage", "reap", "dropped experts");
  for (const auto& l : s.selection.layers)
    std::printf("%-6lld %5zu %7zu %9.2f%% %9.2f%%  %s\n", (long long)l.layer, l.kept.size(), l.dropped.size(),
                100.0 * l.dropped_usage_share, 100.0 * l.dropped_reap_share, export_id_list(l.dropped).c_str());
  std::printf("(usage, reap: the dropped experts' share of the layer's routed slots and of its summed REAP score "
              "on the profile's calibration)\n");
}

}  // namespace

Command add_export(CLI::App& app) {
  auto o = std::make_shared<ExportCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write the checkpoint with the least salient experts removed, in its own HF layout (REAP pruning)");
  sub->add_option("--model", o->request.model_path, "Source checkpoint folder")->required();
  sub->add_option("--profile", o->request.profile_path, "profile.json of that checkpoint: ranks the experts")
      ->required();
  sub->add_option("-o,--out", o->request.out_path, "Output folder (staged beside it, renamed when complete)")
      ->required();
  auto* fraction = sub->add_option("--prune-fraction", o->prune_fraction,
                                   "Remove floor(F x experts) experts from every MoE layer, 0 <= F < 1");
  auto* keep = sub->add_option("--keep-experts", o->keep_experts, "Keep N experts in every MoE layer");
  fraction->excludes(keep);
  sub->add_option("--rank-by", o->rank_by,
                  "What ranks the experts of a layer: reap (default: mean gate x expert output norm), usage "
                  "(share of routed tokens) or random (a seeded shuffle, a baseline); the lowest go. Without "
                  "--prune-fraction and --keep-experts the profile's pruned class goes");
  sub->add_option("--seed", o->request.selection.seed, "Seed of --rank-by random (default 0)");
  sub->add_option("--shard-size", o->shard_size, "Maximum bytes per output shard (default 4G)");
  sub->add_flag("--force", o->request.force, "Replace an existing output folder");
  sub->add_flag("--summary", o->summary, "Print per layer what was kept and the usage share dropped");
  add_json_options(sub, o->json, "the summary (per layer the experts kept and dropped)");
  sub->add_flag("-v,--verbose", o->verbose, "Log progress on stderr even when it is not a terminal");
  return {sub, [o, fraction, keep] {
            auto& r = o->request;
            io::check_outputs_apart({{"-o", r.out_path}, o->json.output()},
                                    {{"--model", r.model_path}, {"--profile", r.profile_path}});
            if (fraction->count()) r.selection.prune_fraction = o->prune_fraction;
            if (keep->count()) r.selection.keep_experts = o->keep_experts;
            r.selection.rank_by = prune::parse_rank_by(o->rank_by, "--rank-by");
            r.shard_size = parse_byte_size(o->shard_size, "--shard-size");
            ExportBarObserver observer(o->verbose);
            const prune::ExportSummary s = prune::run_export(r, &observer);
            observer.finish();
            if (!o->json.print) {
              if (o->summary) print_export_table(s);
              std::printf("exported %s: %lld -> %lld experts per MoE layer (%zu layers, by %s); tensors %s -> %s; "
                          "wrote %s (%zu shard(s), %zu other file(s) copied)\n",
                          s.model_type.c_str(), (long long)s.selection.experts_before,
                          (long long)s.selection.experts_after, s.selection.layers.size(), s.selection.rule.c_str(),
                          human_bytes(double(s.bytes_before)).c_str(), human_bytes(double(s.bytes_after)).c_str(),
                          s.out_path.c_str(), s.shards.size(), s.files_copied.size());
              if (s.mtp_tensors_dropped)
                std::printf("note: %lld multi-token-prediction tensor(s) left out (layers after num_hidden_layers)\n",
                            (long long)s.mtp_tensors_dropped);
            }
            if (o->json.wanted()) emit_json(o->json, prune::summary_to_json(s));
            return 0;
          }};
}

}  // namespace eq::app

// The eval report: every number of one `expertquant eval` run, as JSON
// (schema "expertquant.eval_report" v1, docs/report.md), as a terminal table
// and as one self-contained HTML page (inline SVG charts, no scripts, no
// network).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process_usage.h"
#include "eval/collapse.h"
#include "eval/latency.h"
#include "eval/quality.h"
#include "pack/manifest.h"

namespace eq::eval {

inline constexpr std::string_view kReportSchema = "expertquant.eval_report";
inline constexpr int kReportVersion = 1;

struct MachineInfo {
  std::string cpu, isa;
  int threads = 1;
  uint64_t peak_rss_bytes = 0;
  // Where the routed experts ran ("cpu" or "cuda"), the GPU's name, and how
  // the packed layers reached it: copies made and copies freed to make room
  // (more copies than layers: the weights streamed layer by layer).
  std::string experts_device = "cpu", gpu;
  int64_t gpu_layer_uploads = 0, gpu_layer_evictions = 0;
  uint64_t gpu_dense_bytes = 0;      // float32 dense matrices copied to the GPU (exec/cuda/device_linear.h)
  uint64_t gpu_dense_cpu_bytes = 0;  // those left on the CPU for want of GPU memory
  // Whether the quality passes' expert prefill products on the GPU took x as
  // two bf16 parts (16 significant bits) rather than one (quant::cuda::split_x).
  bool gpu_quality_x_split = false;
};

// What was evaluated: a packed folder and the manifest facts the report shows.
struct PackSummary {
  std::string folder, policy;
  double avg_bits_per_expert_weight = 0;
  uint64_t expert_bytes_before = 0, expert_bytes_after = 0;
  std::array<int64_t, plan::kNumClasses> class_counts{};
  std::vector<std::string> formats;                // distinct formats used
  std::vector<std::vector<int>> classes;           // [MoE layer][expert] -> class index
  std::vector<int64_t> layers;                     // MoE layer ids, row order of `classes`
  std::vector<int64_t> groups_per_layer;
};
PackSummary summarize_pack(const pack::Manifest& m, const std::string& folder);

struct EvalReport {
  std::string tool_version;
  std::string model_path;  // the unquantized source compared against; empty = none
  // Set when the packed model ran alone (no --model): why the comparison with
  // the unquantized model, and so KL, top-1, per-layer error and the collapse
  // checks, were skipped.
  std::string comparison_skipped;
  MachineInfo machine;
  PackSummary packed;
  std::optional<PackSummary> baseline;
  int64_t ctx = 0;
  std::vector<std::string> texts;
  std::optional<QualityResult> quality;
  std::vector<CollapseCheck> collapse;
  CollapseThresholds collapse_thresholds;
  bool byte_level = true;
  std::optional<LatencyResult> latency, baseline_latency;
  // Wall and CPU seconds, bytes read and memory of each phase (load, quality,
  // collapse, source check, latency), in the order they ran.
  std::vector<PhaseUsage> phases;
  double seconds = 0;
};

nlohmann::ordered_json report_to_json(const EvalReport& r);
// The quality line: "bpb 2.101 -> 2.134 (+1.6%), KL mean 0.012 p99 0.09, top-1 97.1%, collapse 12/12 pass".
std::string quality_line(const EvalReport& r);
// Tables for the terminal (fixed-width text).
std::string report_table(const EvalReport& r);
std::string report_html(const EvalReport& r);

}  // namespace eq::eval

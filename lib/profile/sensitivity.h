// Quantization sensitivity: for each expert and each candidate format, the
// gate-weighted relative output error when only that expert's three matrices
// are quantized (with its own activation energies as importance, exactly as
// pack will quantize it):
//   rel_mse = Σ_i g_i² ‖ŷ_i − y_i‖² / Σ_i g_i² ‖y_i‖²
// over the expert's sample of routed inputs (ExpertSampler). Experts with
// fewer than min_samples routed rows are measured on the layer's sample of all
// calibration tokens forced through the expert (g = 1): source "forced".
// rel_mse × the expert's gated output energy is its additive contribution to
// the block's output error — what the bit-budget allocator minimizes.
// By default the error is estimated from a few rows of each matrix
// (profile/row_sampled_error.h); SensitivityOptions::sample_rows = 0 measures
// it exactly as above.
// A proxied format is measured on a few experts spread over the layers and predicted from
// its proxy on the others (profile/proxy_fit.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/device.h"
#include "model/config.h"
#include "model/weights.h"
#include "profile/expert_sampler.h"
#include "profile/proxy_fit.h"
#include "profile/routing_stats.h"

namespace eq::model {
class WeightStore;
}

namespace eq::profile {

enum class SampleSource { kNone, kRouted, kForced };
std::string_view sample_source_name(SampleSource s);
SampleSource parse_sample_source(std::string_view s);  // throws eq::Error for unknown names

struct ExpertSensitivity {
  SampleSource source = SampleSource::kNone;
  int64_t samples = 0;
  std::vector<double> rel_mse;  // per SensitivityTable::formats; NaN when not measured
};

struct SensitivityTable {
  std::vector<std::string> formats;
  std::vector<std::vector<ExpertSensitivity>> layers;  // [layer index][expert], same order as RoutingStats::layers
  double seconds = 0;
  double seconds_per_format(size_t f) const { return f < format_seconds.size() ? format_seconds[f] : 0.0; }
  std::vector<double> format_seconds;  // time spent quantizing + evaluating each format
  std::vector<std::string> proxy_of;   // per format: the format measured in its place ("" = itself)
  std::vector<ProxyFit> proxy_fits;    // one per proxied format, in format order (profile/proxy_fit.h)

  bool empty() const { return layers.empty(); }
  // Index of `format` in formats, or -1.
  int index_of(const std::string& format) const;
};

struct SensitivityOptions {
  int64_t min_samples = 16;
  // format -> measured format standing in for it (Policy::proxies), scaled
  // by a ratio fitted on this many experts (of the model) measured in both.
  std::vector<std::pair<std::string, std::string>> proxies;
  int64_t proxy_calibration_experts = 12;
  // Rows of each expert matrix quantized to measure a format: the fast
  // estimate of profile/row_sampled_error.h. 0 = every row and the expert's
  // quantized output computed in full (expert_rel_mse below, the exact
  // measurement).
  int64_t sample_rows = 64;
  // (experts done, total experts)
  std::function<void(int64_t, int64_t)> progress;
  // Where the quantizers run (profile --device; quant/device.h).
  quant::Device device = quant::Device::kCpu;
};

// The same measurement one layer at a time, so that a layer-major pass
// measures each layer while its weights are held (model/layer_pass.h):
// measure_layer(li) once per layer index in ascending order, each after the
// layer's statistics and samples are complete, then finish() (the proxy
// fits, over all layers). `stats` and `sampler` must outlive the meter.
class SensitivityMeter {
 public:
  SensitivityMeter(const model::ModelConfig& config, const model::WeightStore& weights, const RoutingStats& stats,
                   const ExpertSampler& sampler, const std::vector<std::string>& formats,
                   const SensitivityOptions& options);
  void measure_layer(int64_t layer_index);
  SensitivityTable finish();

 private:
  const model::ModelConfig& c_;
  const model::WeightStore& weights_;
  const RoutingStats& stats_;
  const ExpertSampler& sampler_;
  SensitivityOptions options_;
  SensitivityTable table_;
  std::vector<int> source_index_;
  bool any_proxy_ = false;
  std::vector<std::vector<bool>> calibrate_;
  std::vector<std::vector<ProxyPoint>> points_;
  int64_t done_ = 0;
};

SensitivityTable measure_sensitivity(const model::ModelConfig& config, const model::WeightStore& weights,
                                     const RoutingStats& stats, const ExpertSampler& sampler,
                                     const std::vector<std::string>& formats, const SensitivityOptions& options);

// Relative MSE of one expert (its matrices quantized to `format`, its biases
// and activation as they are) on inputs x [rows, H] with gate weights;
// importance vectors may be empty (unweighted).
double expert_rel_mse(const model::ModelConfig& config, const model::MlpWeights& expert, const float* x,
                      const float* gates, int64_t rows, const std::string& format,
                      const std::vector<float>& importance_in, const std::vector<float>& importance_mid,
                      const std::string& tensor_prefix, quant::Device device = quant::Device::kCpu);

}  // namespace eq::profile

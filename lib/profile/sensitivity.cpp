#include "profile/sensitivity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>

#include <Eigen/Core>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/weights.h"
#include "profile/expert_output.h"
#include "profile/lossless_source.h"
#include "profile/row_sampled_error.h"
#include "quant/gpus.h"
#include "quant/format.h"

namespace eq::profile {
namespace {

std::vector<float> to_float(const std::vector<double>& v) {
  double total = 0;
  for (double d : v) total += d;
  if (total <= 0) return {};  // never routed: quantized unweighted, as pack does
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace

std::string_view sample_source_name(SampleSource s) {
  switch (s) {
    case SampleSource::kRouted: return "routed";
    case SampleSource::kForced: return "forced";
    default: return "none";
  }
}

SampleSource parse_sample_source(std::string_view s) {
  if (s == "routed") return SampleSource::kRouted;
  if (s == "forced") return SampleSource::kForced;
  if (s == "none") return SampleSource::kNone;
  invalid("unknown sensitivity sample source \"" + std::string(s) + "\" (routed, forced, none)");
}

int SensitivityTable::index_of(const std::string& format) const {
  for (size_t i = 0; i < formats.size(); ++i)
    if (formats[i] == format) return int(i);
  return -1;
}

double expert_rel_mse(const model::ModelConfig& c, const model::MlpWeights& w, const float* x, const float* gates,
                      int64_t rows, const std::string& format, const std::vector<float>& importance_in,
                      const std::vector<float>& importance_mid, const std::string& prefix, quant::Device device) {
  const int64_t H = c.hidden_size, I = w.intermediate;
  const RowMatrix y = expert_output(w, x, rows, H).y;
  const auto qg =
      quantized_round_trip(format, w.gate->data.data(), I, H, importance_in, prefix + "gate_proj", device);
  const auto qu = quantized_round_trip(format, w.up->data.data(), I, H, importance_in, prefix + "up_proj", device);
  const auto qd =
      quantized_round_trip(format, w.down->data.data(), H, I, importance_mid, prefix + "down_proj", device);
  // Biases are stored unquantized: only the matrices change.
  const RowMatrix yq = expert_output(w, qg.data(), qu.data(), qd.data(), x, rows, H).y;
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double g2 = double(gates[r]) * double(gates[r]);
    double e = 0, s = 0;
    for (int64_t i = 0; i < H; ++i) {
      const double d = double(yq(r, i)) - double(y(r, i));
      e += d * d;
      s += double(y(r, i)) * double(y(r, i));
    }
    num += g2 * e;
    den += g2 * s;
  }
  return den > 0 ? num / den : 0.0;
}

namespace {

// The sample an expert is measured on: its routed rows, or the layer's forced
// rows when it has fewer than min_samples; null when the layer saw no tokens.
const InputSample* expert_sample(const ExpertSampler& sampler, int64_t li, int64_t e, int64_t min_samples,
                                 SampleSource& source) {
  const InputSample* sample = &sampler.expert(li, e);
  source = SampleSource::kRouted;
  if (sample->rows < std::min(min_samples, sampler.capacity())) {
    sample = &sampler.layer(li);
    source = SampleSource::kForced;
  }
  if (sample->rows == 0) {
    source = SampleSource::kNone;
    return nullptr;
  }
  return sample;
}

}  // namespace

SensitivityMeter::SensitivityMeter(const model::ModelConfig& c, const model::WeightStore& weights,
                                   const RoutingStats& stats, const ExpertSampler& sampler,
                                   const std::vector<std::string>& formats, const SensitivityOptions& options)
    : c_(c), weights_(weights), stats_(stats), sampler_(sampler), options_(options) {
  table_.formats = formats;
  table_.format_seconds.assign(formats.size(), 0.0);
  table_.proxy_of.assign(formats.size(), "");
  source_index_.resize(formats.size());
  for (size_t f = 0; f < formats.size(); ++f) {
    source_index_[f] = int(f);
    for (const auto& [from, to] : options.proxies)
      if (from == formats[f]) {
        table_.proxy_of[f] = to;
        source_index_[f] = table_.index_of(to);
        if (source_index_[f] < 0) invalid("sensitivity: proxy " + to + " of " + from + " is not measured");
        any_proxy_ = true;
      }
  }
  points_.resize(formats.size());
  calibrate_.resize(stats.layers.size());
}

void SensitivityMeter::measure_layer(int64_t li) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string>& formats = table_.formats;
  const int64_t E = c_.num_experts;
  const int64_t L = int64_t(stats_.layers.size());
  if (li != int64_t(table_.layers.size()))
    invalid("sensitivity: layer index " + std::to_string(li) + " measured out of order");
  // The experts on which proxied formats are measured too (their ratio's fit).
  std::vector<bool>& calibrate = calibrate_[li];
  calibrate.assign(size_t(E), false);
  if (any_proxy_ && options_.proxy_calibration_experts > 0) {
    std::vector<int64_t> tokens(static_cast<size_t>(E));
    std::vector<bool> has_sample(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      SampleSource source;
      tokens[e] = stats_.layers[li].experts[e].tokens;
      has_sample[e] = expert_sample(sampler_, li, e, options_.min_samples, source) != nullptr;
    }
    // The model's count spread over its layers: layer li takes
    // ⌊(li+1)·K/L⌋ − ⌊li·K/L⌋, so the cost stays K experts however deep the model.
    const int64_t K = options_.proxy_calibration_experts;
    const int64_t count = (li + 1) * K / L - li * K / L;
    for (int64_t e : calibration_experts(tokens, has_sample, count)) calibrate[e] = true;
  }
  const int64_t total = L * E;
  const LayerStats& ls = stats_.layers[li];
  std::vector<ExpertSensitivity> row(E);
  std::vector<const InputSample*> samples(size_t(E), nullptr);
  for (int64_t e = 0; e < E; ++e) {
    row[e].rel_mse.assign(formats.size(), std::numeric_limits<double>::quiet_NaN());
    samples[e] = expert_sample(sampler_, li, e, options_.min_samples, row[e].source);
    if (samples[e]) row[e].samples = samples[e]->rows;
  }
  // Measures expert e in the formats `pick` selects, adding each format's time to `seconds`.
  const auto measure = [&](int64_t e, const auto& pick, std::vector<double>& seconds) {
    const InputSample* sample = samples[e];
    ExpertSensitivity& s = row[e];
    const model::MlpWeights w = model::load_expert(weights_, c_, ls.layer, e);
    const ExpertStats& es = ls.experts[e];
    const auto imp_in = to_float(es.energy_in), imp_mid = to_float(es.energy_mid);
    const std::string prefix = "model.layers." + std::to_string(ls.layer) + ".mlp.experts." + std::to_string(e) + ".";
    // The fast estimate's unquantized forward, shared by every format.
    std::optional<RowSampledExpert> sampled;
    if (options_.sample_rows > 0)
      sampled.emplace(w, c_.hidden_size, sample->x.data(), sample->gate.data(), sample->rows, options_.sample_rows);
    for (size_t f = 0; f < formats.size(); ++f) {
      if (!pick(f)) continue;
      // Pack stores this expert's source bits unchanged: no error at all.
      if (imports_expert_losslessly(quant::format_by_name(formats[f]), c_, weights_.source(), ls.layer, e)) {
        s.rel_mse[f] = 0.0;
        continue;
      }
      const auto f0 = std::chrono::steady_clock::now();
      s.rel_mse[f] = sampled ? sampled->rel_mse(formats[f], imp_in, imp_mid, prefix, options_.device)
                             : expert_rel_mse(c_, w, sample->x.data(), sample->gate.data(), sample->rows, formats[f],
                                              imp_in, imp_mid, prefix, options_.device);
      seconds[f] += std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
    }
  };
  const auto direct = [&](size_t f) { return table_.proxy_of[f].empty(); };
  const auto proxied = [&](size_t f) { return !table_.proxy_of[f].empty(); };
  // The formats measured directly: one expert per task (each value is
  // computed from its expert alone, so the table is the same for any thread
  // count). The GPU quantizers take one expert at a time.
  std::vector<std::vector<double>> seconds(size_t(E), std::vector<double>(formats.size(), 0.0));
  std::mutex progress_mu;
  const auto one_expert = [&](size_t e) {
    if (samples[e]) measure(int64_t(e), direct, seconds[e]);
    if (calibrate[e]) return;  // counted once its proxied formats are measured below
    std::lock_guard<std::mutex> lock(progress_mu);
    ++done_;
    if (options_.progress) options_.progress(done_, total);
  };
  // On GPUs: a worker per pool thread, worker w on GPU w mod gpus taking
  // experts w, w + workers, ... (each value is computed from its expert alone,
  // so the table is the same for any split). One GPU is no exception: a
  // row-sampled expert is too little work to fill it, and one expert at a
  // time from one thread left it idle between launches (4 Qwen3-30B-A3B-shaped
  // layers: 160 s on one GPU against 22 s on two; docs/benchmarks.md,
  // "Real-size runs").
  const size_t gpus = options_.device == quant::Device::kCpu ? 0 : quant::device_count(options_.device);
  const auto on_gpus = [&](const std::function<void(size_t)>& expert) {
    const size_t workers = std::max<size_t>(gpus, size_t(default_pool().size()));
    default_pool().run(workers, [&](size_t w) {
      quant::bind_device(options_.device, w);
      for (size_t e = w; e < size_t(E); e += workers) expert(e);
    });
  };
  if (gpus == 0) default_pool().run(size_t(E), one_expert);
  else on_gpus(one_expert);
  // The proxied (trellis) formats on the calibration experts: on the CPU one
  // expert at a time (their quantizer spreads one matrix over the pool
  // itself), on GPUs as above; the fit's points in expert order either way.
  const auto one_calibration = [&](size_t e) {
    if (!calibrate[e]) return;
    if (samples[e]) measure(int64_t(e), proxied, seconds[e]);
    std::lock_guard<std::mutex> lock(progress_mu);
    ++done_;
    if (options_.progress) options_.progress(done_, total);
  };
  if (gpus == 0)
    for (int64_t e = 0; e < E; ++e) one_calibration(size_t(e));
  else
    on_gpus(one_calibration);
  for (int64_t e = 0; e < E; ++e)
    if (calibrate[e] && samples[e])
      for (size_t f = 0; f < formats.size(); ++f)
        if (proxied(f)) points_[f].push_back({ls.layer, e, row[e].rel_mse[f], row[e].rel_mse[source_index_[f]], 0.0});
  for (int64_t e = 0; e < E; ++e)
    for (size_t f = 0; f < formats.size(); ++f) table_.format_seconds[f] += seconds[e][f];
  table_.layers.push_back(std::move(row));
  table_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SensitivityTable SensitivityMeter::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  if (table_.layers.size() != stats_.layers.size())
    invalid("sensitivity: " + std::to_string(table_.layers.size()) + " of " + std::to_string(stats_.layers.size()) +
            " layers measured");
  const int64_t E = c_.num_experts, L = int64_t(stats_.layers.size());
  // The other experts of a proxied format: the fitted ratio × their proxy's rel_mse.
  for (size_t f = 0; f < table_.formats.size(); ++f) {
    if (table_.proxy_of[f].empty()) continue;
    table_.proxy_fits.push_back(fit_proxy(table_.formats[f], table_.proxy_of[f], std::move(points_[f])));
    const double ratio = table_.proxy_fits.back().ratio;
    for (int64_t li = 0; li < L; ++li)
      for (int64_t e = 0; e < E; ++e) {
        ExpertSensitivity& s = table_.layers[li][e];
        if (s.source != SampleSource::kNone && !calibrate_[li][e])
          s.rel_mse[f] = ratio * s.rel_mse[source_index_[f]];
      }
  }
  table_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(table_);
}

SensitivityTable measure_sensitivity(const model::ModelConfig& c, const model::WeightStore& weights,
                                     const RoutingStats& stats, const ExpertSampler& sampler,
                                     const std::vector<std::string>& formats, const SensitivityOptions& options) {
  SensitivityMeter meter(c, weights, stats, sampler, formats, options);
  for (int64_t li = 0; li < int64_t(stats.layers.size()); ++li) meter.measure_layer(li);
  return meter.finish();
}

}  // namespace eq::profile

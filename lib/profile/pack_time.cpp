#include "profile/pack_time.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "profile/classify.h"
#include "quant/quantize_rate.h"

namespace eq::profile {

namespace {

// Seconds one thread takes to quantize one expert in `format`.
double one_thread_seconds(const PackRates& r, const model::ModelConfig& c, const std::string& format) {
  const auto it = std::find_if(r.per_thread.begin(), r.per_thread.end(), [&](const auto& x) { return x.first == format; });
  if (it == r.per_thread.end() || !(it->second > 0))
    fail(ErrorKind::kInternal, "pack time: no quantize rate measured for " + format);
  return 3.0 * double(c.hidden_size) * double(c.moe_intermediate_size) / it->second;
}

}  // namespace

double PackRates::expert_seconds(const model::ModelConfig& c, const std::string& format) const {
  if (format.empty()) return 0.0;
  return one_thread_seconds(*this, c, format) / double(std::max(1, threads));
}

double PackRates::group_seconds(const model::ModelConfig& c, const std::string& format, int64_t n) const {
  if (format.empty() || n <= 0) return 0.0;
  const int64_t t = std::max(1, threads);
  const double one = one_thread_seconds(*this, c, format);
  return n == 1 ? one / double(t) : double((n + t - 1) / t) * one;
}

nlohmann::ordered_json PackRates::json() const {
  nlohmann::ordered_json rates = nlohmann::ordered_json::object();
  for (const auto& [format, rate] : per_thread) rates[format] = rate;
  return {{"device", device}, {"threads", threads}, {"weights_per_second_per_thread", rates}};
}

PackRates measure_pack_rates(const std::vector<std::string>& formats, const model::ModelConfig& c,
                             quant::Device device, int threads) {
  PackRates r;
  r.device = std::string(quant::device_name(device));
  r.threads = threads;
  for (const std::string& f : formats) {
    const quant::FormatTraits& t = quant::format_by_name(f);
    // Seconds per weight of each shape; gate and up hold two thirds of the weights.
    const double in = 1.0 / quant::measure_quantize_rate(t, c.hidden_size, device, true);
    const double down = 1.0 / quant::measure_quantize_rate(t, c.moe_intermediate_size, device, true);
    r.per_thread.emplace_back(f, 3.0 / (2.0 * in + down));
  }
  return r;
}

double predicted_pack_seconds(const std::vector<std::pair<size_t, std::string>>& layer_formats,
                              const model::ModelConfig& c, const PackRates& rates) {
  std::map<std::pair<size_t, std::string>, int64_t> groups;
  for (const auto& lf : layer_formats)
    if (!lf.second.empty()) ++groups[lf];
  double s = 0;
  for (const auto& [group, n] : groups) s += rates.group_seconds(c, group.second, n);
  return s;
}

double predicted_pack_seconds(const Classification& cls, const model::ModelConfig& c, const PackRates& rates) {
  std::vector<std::pair<size_t, std::string>> layer_formats;
  for (size_t li = 0; li < cls.layers.size(); ++li)
    for (const ExpertDecision& d : cls.layers[li]) layer_formats.emplace_back(li, d.format);
  return predicted_pack_seconds(layer_formats, c, rates);
}

}  // namespace eq::profile

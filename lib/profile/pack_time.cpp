#include "profile/pack_time.h"

#include <algorithm>

#include "core/error.h"
#include "profile/classify.h"
#include "quant/quantize_rate.h"

namespace eq::profile {

double PackRates::expert_seconds(const model::ModelConfig& c, const std::string& format) const {
  if (format.empty()) return 0.0;
  const auto it = std::find_if(per_thread.begin(), per_thread.end(), [&](const auto& r) { return r.first == format; });
  if (it == per_thread.end() || !(it->second > 0))
    fail(ErrorKind::kInternal, "pack time: no quantize rate measured for " + format);
  const double weights = 3.0 * double(c.hidden_size) * double(c.moe_intermediate_size);
  return weights / (it->second * double(std::max(1, threads)));
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

double predicted_pack_seconds(const Classification& cls, const model::ModelConfig& c, const PackRates& rates) {
  double s = 0;
  for (const auto& row : cls.layers)
    for (const ExpertDecision& d : row) s += rates.expert_seconds(c, d.format);
  return s;
}

}  // namespace eq::profile

// The pack time an allocation is predicted to take on this machine, from each
// format's measured quantize rate (quant/quantize_rate.h) and the way pack
// schedules its work: one group of experts per format and layer at a time,
// its experts dealt round-robin to the threads. Reading, hashing and writing
// are left out: on every model measured they are a small part of pack next
// to the slow quantizers. The rates are data, so tests (and a bit budget with
// a time limit, bit_budget.h) can fix them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "quant/device.h"

namespace eq::profile {

struct Classification;

struct PackRates {
  std::string device = "cpu";
  int threads = 1;  // pack's quantizing threads
  std::vector<std::pair<std::string, double>> per_thread;  // format -> weights per second of one thread

  bool empty() const { return per_thread.empty(); }
  // Seconds pack spends quantizing one expert (gate, up, down) in `format`
  // ("" = pruned: 0) with every thread busy, i.e. its share of the threads:
  // the price of pack time in an allocation. Throws eq::Error (internal) for a
  // format without a rate.
  double expert_seconds(const model::ModelConfig& c, const std::string& format) const;
  // Seconds pack takes for a group of n experts of `format` in one layer: each
  // thread quantizes ceil(n / threads) of them in a row, one at a time; a lone
  // expert's quantizer spreads its matrix over the threads (the trellis search
  // does; the fast formats' time is too small to matter).
  double group_seconds(const model::ModelConfig& c, const std::string& format, int64_t n) const;
  nlohmann::ordered_json json() const;
};

// Times each format's quantizer in one thread on probe blocks of the experts'
// two shapes (quant::measure_quantize_rate; gate and up [I, H], down [H, I]),
// weighted by a per-column importance as pack weights a profile's routed
// experts: about 0.04 s a format, the trellis formats a few tenths of a second
// more. The format's rate is that of a whole expert, 3·I·H weights.
PackRates measure_pack_rates(const std::vector<std::string>& formats, const model::ModelConfig& c,
                             quant::Device device, int threads);

// The allocation's predicted pack time: group_seconds summed over the groups
// of every layer (one per format).
double predicted_pack_seconds(const Classification& cls, const model::ModelConfig& c, const PackRates& rates);

// The same from each expert's layer and format ("" = pruned), in any order.
double predicted_pack_seconds(const std::vector<std::pair<size_t, std::string>>& layer_formats,
                              const model::ModelConfig& c, const PackRates& rates);

}  // namespace eq::profile

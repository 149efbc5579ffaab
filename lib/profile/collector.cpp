#include "profile/collector.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/routing.h"
#include "model/weights.h"
#include "profile/expert_output.h"
#include "profile/trace.h"

namespace eq::profile {
namespace {

using ConstMap = Eigen::Map<const RowMatrix>;  // RowMatrix: profile/expert_output.h

}  // namespace

std::vector<int64_t> moe_layers(const model::ModelConfig& c) {
  std::vector<int64_t> v;
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_is_moe.empty() || c.layer_is_moe[l]) v.push_back(l);
  return v;
}

ProfileCollector::ProfileCollector(const model::ModelConfig& config, const model::WeightStore* weights,
                                   bool has_probs, int64_t sample_capacity, uint64_t seed, TraceWriter* trace)
    : config_(config), weights_(weights), trace_(trace) {
  const auto layers = moe_layers(config);
  stats_ = RoutingStats::make(layers, config.hidden_size, config.moe_intermediate_size, config.num_experts,
                              config.top_k, has_probs, weights != nullptr);
  if (weights)
    sampler_ = ExpertSampler(int64_t(layers.size()), config.num_experts, config.hidden_size, sample_capacity, seed);
}

int64_t ProfileCollector::layer_index(int64_t layer) const {
  for (size_t i = 0; i < stats_.layers.size(); ++i)
    if (stats_.layers[i].layer == layer) return int64_t(i);
  invalid("profile: layer " + std::to_string(layer) + " is not a MoE layer of the model");
}

void ProfileCollector::on_moe_block(const model::MoeObservation& obs) {
  observe(obs.layer, obs.tokens, obs.input, obs.router_logits, obs.expert_ids, obs.gate_weights);
}

void ProfileCollector::observe(int64_t layer, int64_t n, const float* x, const float* logits, const int32_t* ids,
                               const float* gates) {
  const int64_t li = layer_index(layer);
  LayerStats& ls = stats_.layers[li];
  const int64_t E = config_.num_experts, K = config_.top_k, H = config_.hidden_size;
  ls.tokens += n;
  if (trace_) trace_->write_block(layer, n, ids, gates);

  // Router probabilities (softmax in float64), summed per expert in token order.
  if (logits && stats_.has_probs) {
    std::vector<double> probs(n * E);
    default_pool().parallel_for(size_t(n), 256, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        const float* lg = logits + t * E;
        const double mx = *std::max_element(lg, lg + E);
        double sum = 0;
        for (int64_t e = 0; e < E; ++e) sum += (probs[t * E + e] = std::exp(double(lg[e]) - mx));
        for (int64_t e = 0; e < E; ++e) probs[t * E + e] /= sum;
      }
    });
    for (int64_t t = 0; t < n; ++t)
      for (int64_t e = 0; e < E; ++e) ls.experts[e].prob_sum += probs[t * E + e];
  }

  model::Routing routing;
  routing.tokens = n;
  routing.top_k = K;
  routing.expert_ids.assign(ids, ids + n * K);
  routing.weights.assign(gates, gates + n * K);
  for (int64_t s = 0; s < n * K; ++s)
    if (ids[s] < 0 || ids[s] >= E)
      invalid("profile: layer " + std::to_string(layer) + ": expert id " + std::to_string(ids[s]) + " out of range");
  const model::ExpertGroups groups = model::group_by_expert(routing, E);

  if (!x || !weights_) {
    for (int64_t e = 0; e < E; ++e)
      for (int64_t s = groups.offsets[e]; s < groups.offsets[e + 1]; ++s) {
        const double g = gates[groups.slots[s]];
        ExpertStats& es = ls.experts[e];
        ++es.tokens;
        es.gate_sum += g;
        es.gate_max = std::max(es.gate_max, g);
      }
    return;
  }

  // Expert weights converted on this thread (the store is thread-safe, but
  // this keeps conversion order fixed), experts evaluated in parallel: each
  // expert's accumulators are touched by exactly one task, in token order.
  std::vector<model::MlpWeights> experts(E);
  std::vector<int64_t> used;
  for (int64_t e = 0; e < E; ++e)
    if (groups.offsets[e + 1] > groups.offsets[e]) {
      experts[e] = model::load_expert(*weights_, config_, layer, e);
      used.push_back(e);
    }
  const int64_t I = config_.moe_intermediate_size;
  std::vector<float> slot_out(n * K * H, 0.0f);
  default_pool().run(used.size(), [&](size_t ui) {
    const int64_t e = used[ui];
    const int64_t b = groups.offsets[e], m = groups.offsets[e + 1] - b;
    RowMatrix xin(m, H);
    for (int64_t r = 0; r < m; ++r) xin.row(r) = ConstMap(x + (groups.slots[b + r] / K) * H, 1, H);
    const ExpertOutput out = expert_output(experts[e], xin.data(), m, H);
    const RowMatrix& g = out.mid;
    const RowMatrix& y = out.y;
    ExpertStats& es = ls.experts[e];
    for (int64_t r = 0; r < m; ++r) {
      const int64_t slot = groups.slots[b + r];
      const double gate = gates[slot];
      double yy = 0;
      for (int64_t i = 0; i < H; ++i) yy += double(y(r, i)) * double(y(r, i));
      const double norm = std::sqrt(yy);
      ++es.tokens;
      es.gate_sum += gate;
      es.gate_max = std::max(es.gate_max, gate);
      es.saliency_sum += gate * norm;
      es.out_norm_sum += norm;
      es.gated_out_energy += gate * gate * yy;
      for (int64_t i = 0; i < H; ++i) es.energy_in[i] += double(xin(r, i)) * double(xin(r, i));
      for (int64_t i = 0; i < I; ++i) es.energy_mid[i] += double(g(r, i)) * double(g(r, i));
      std::copy(y.row(r).data(), y.row(r).data() + H, slot_out.data() + slot * H);
      sampler_.offer_expert(li, e, xin.row(r).data(), float(gate));
    }
  });

  // Energy of the routed part of the block output, summed in token order.
  std::vector<double> token_energy(n);
  default_pool().parallel_for(size_t(n), 256, [&](size_t t0, size_t t1) {
    std::vector<float> o(H);
    for (size_t t = t0; t < t1; ++t) {
      std::fill(o.begin(), o.end(), 0.0f);
      for (int64_t j = 0; j < K; ++j) {
        const float w = gates[t * K + j];
        const float* y = slot_out.data() + (t * K + j) * H;
        for (int64_t i = 0; i < H; ++i) o[i] += w * y[i];
      }
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += double(o[i]) * double(o[i]);
      token_energy[t] = s;
    }
  });
  for (int64_t t = 0; t < n; ++t) {
    ls.routed_output_energy += token_energy[t];
    sampler_.offer_layer(li, x + t * H);
  }
}

}  // namespace eq::profile

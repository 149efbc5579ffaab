#include "exec/tune.h"

#include <algorithm>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"

namespace eq::exec {

TuneResult tune_sort_cutoff(PackedModel& pm, const MoeInputs& inputs, const TuneOptions& options) {
  if (options.sweep.empty()) invalid("tune: empty M sweep");
  const int64_t max_m = *std::max_element(options.sweep.begin(), options.sweep.end());
  if (max_m > inputs.rows) invalid("tune: M up to " + std::to_string(max_m) + " needs that many captured rows");
  const int64_t H = inputs.hidden;
  // Per-token = auto with an infinite cutoff; sorted = auto with cutoff 0.
  const bool gpu = options.device == quant::Device::kCuda;
  const std::shared_ptr<const Dispatch> per_token =
      gpu ? cuda::make_cuda_dispatch(DispatchKind::kAuto, INT64_MAX) : std::make_shared<AutoDispatch>(INT64_MAX);
  const std::shared_ptr<const Dispatch> sorted =
      gpu ? cuda::make_cuda_dispatch(DispatchKind::kSorted, 0) : std::make_shared<SortedDispatch>();
  const std::shared_ptr<const Dispatch> saved = pm.dispatch_ptr();
  std::vector<float> out;
  auto step = [&](int64_t m) {
    out.resize(static_cast<size_t>(m * H));
    for (const PackedLayer& l : pm.layers()) {
      model::MoeCall call{l.layer, 1, m, 0, nullptr};
      pm.block(l.layer).forward(call, inputs.by_layer.at(l.layer).data(), out.data());
    }
  };
  TuneResult r;
  // Two passes over the sweep: dispatch crossover, then kernel crossovers (CPU only).
  const int64_t points = (gpu ? 1 : 2) * static_cast<int64_t>(options.sweep.size());
  int64_t done = 0;
  for (int64_t m : options.sweep) {
    if (options.progress) options.progress(done++, points, "sorted/per-token M=" + std::to_string(m));
    std::vector<double> tp, ts;
    for (int i = 0; i < options.warmup + options.reps; ++i) {
      pm.set_dispatch(per_token);
      const TimingStats a = time_repeated([&] { step(m); }, 0, 1);
      pm.set_dispatch(sorted);
      const TimingStats b = time_repeated([&] { step(m); }, 0, 1);
      if (i >= options.warmup) tp.push_back(a.median), ts.push_back(b.median);
    }
    r.points.push_back({m, summarize_times(tp), summarize_times(ts), {}, {}, {}});
  }
  r.sort_cutoff = 0;
  for (const TunePoint& p : r.points) {
    if (p.sorted.median * (1.0 + options.tie_margin) < p.per_token.median) break;
    r.sort_cutoff = p.m;
  }
  if (gpu) {
    pm.set_dispatch(saved);
    if (options.progress) options.progress(points, points, "done");
    r.config = options.base;
    r.config.device = quant::Device::kCuda;
    r.config.cuda_sort_cutoff = r.sort_cutoff;
    r.config.source = "tune";
    nlohmann::json rec;
    rec["packed"] = pm.folder();
    rec["gpu"] = cuda::gpu_name();
    rec["rule"] = "largest M before the first M where sorted is faster by more than tie_margin (medians of one MoE "
                  "step, experts on the GPU)";
    rec["tie_margin"] = options.tie_margin;
    nlohmann::json pts = nlohmann::json::array();
    for (const TunePoint& p : r.points)
      pts.push_back({{"m", p.m}, {"per_token_ms", p.per_token.median * 1e3}, {"sorted_ms", p.sorted.median * 1e3}});
    rec["points"] = pts;
    r.config.cuda_tuned = rec;
    return r;
  }
  // Decode vs small-batch vs batch expert-MLP kernel, under auto dispatch at
  // that cutoff, interleaved so drifting load hits all three alike.
  pm.set_dispatch(std::make_shared<AutoDispatch>(r.sort_cutoff));
  const MlpKernelThresholds all_decode{.decode_max_tokens = INT64_MAX, .small_batch_max_tokens = INT64_MAX};
  const MlpKernelThresholds all_small{.decode_max_tokens = 0, .small_batch_max_tokens = INT64_MAX};
  const MlpKernelThresholds all_batch{.decode_max_tokens = 0, .small_batch_max_tokens = 0};
  for (TunePoint& p : r.points) {
    if (options.progress) options.progress(done++, points, "decode/small-batch/batch M=" + std::to_string(p.m));
    std::vector<double> td, tsb, tb;
    for (int i = 0; i < options.warmup + options.reps; ++i) {
      pm.set_mlp_kernel_thresholds(all_decode);
      const TimingStats a = time_repeated([&] { step(p.m); }, 0, 1);
      pm.set_mlp_kernel_thresholds(all_small);
      const TimingStats b = time_repeated([&] { step(p.m); }, 0, 1);
      pm.set_mlp_kernel_thresholds(all_batch);
      const TimingStats c = time_repeated([&] { step(p.m); }, 0, 1);
      if (i >= options.warmup) td.push_back(a.median), tsb.push_back(b.median), tb.push_back(c.median);
    }
    p.decode = summarize_times(td);
    p.small_batch = summarize_times(tsb);
    p.batch = summarize_times(tb);
  }
  r.decode_max_tokens = 0;
  for (const TunePoint& p : r.points) {
    const double other = std::min(p.small_batch.median, p.batch.median);
    if (other * (1.0 + options.tie_margin) < p.decode.median) break;
    r.decode_max_tokens = p.m;
  }
  r.small_batch_max_tokens = r.decode_max_tokens;
  for (const TunePoint& p : r.points) {
    if (p.m <= r.decode_max_tokens) continue;
    if (p.batch.median * (1.0 + options.tie_margin) < p.small_batch.median) break;
    r.small_batch_max_tokens = p.m;
  }
  pm.set_dispatch(saved);
  if (options.progress) options.progress(points, points, "done");
  r.config.sort_cutoff = r.sort_cutoff;
  r.config.mlp_kernels = {.decode_max_tokens = r.decode_max_tokens, .small_batch_max_tokens = r.small_batch_max_tokens};
  pm.set_mlp_kernel_thresholds(r.config.mlp_kernels);
  r.config.source = "tune";
  nlohmann::json rec;
  rec["packed"] = pm.folder();
  rec["cpu"] = std::string(cpu_model_name());
  rec["isa"] = std::string(isa_name(active_isa()));
  rec["threads"] = default_pool().size();
  rec["rule"] = "largest M before the first M where sorted is faster by more than tie_margin (medians of one MoE step)";
  rec["decode_rule"] =
      "largest M before the first M where the batch expert-MLP kernel is faster than decode by more than tie_margin "
      "(auto dispatch at sort_cutoff)";
  rec["small_batch_rule"] =
      "from decode_max_tokens on, largest M before the first M where the batch kernel is faster than the small-batch "
      "kernel by more than tie_margin";
  rec["tie_margin"] = options.tie_margin;
  nlohmann::json pts = nlohmann::json::array();
  for (const TunePoint& p : r.points)
    pts.push_back({{"m", p.m},
                   {"per_token_ms", p.per_token.median * 1e3},
                   {"sorted_ms", p.sorted.median * 1e3},
                   {"decode_ms", p.decode.median * 1e3},
                   {"small_batch_ms", p.small_batch.median * 1e3},
                   {"batch_ms", p.batch.median * 1e3}});
  rec["points"] = pts;
  r.config.tuned = rec;
  return r;
}

}  // namespace eq::exec

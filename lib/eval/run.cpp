#include "eval/run.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/process_usage.h"
#include "core/thread_pool.h"
#include "eval/quality.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/moe_inputs.h"
#include "exec/cuda/device_linear.h"
#include "exec/open_for_run.h"
#include "quant/cuda/cuda_gpus.h"

namespace eq::eval {
namespace {

// Nothing to tell: the observer of a caller that gave none.
EvalObserver& quiet() {
  static EvalObserver none;
  return none;
}

// On the GPU, the quality passes and collapse checks multiply the experts'
// prefill x as two bf16 parts (quant::cuda::set_split_x_default), unless
// EXPERTQUANT_GPU_SPLIT_X says otherwise: x rounded to bf16 once moved
// qwen3moe-small's bits per byte by -5.4e-4 from the CPU's float32 path, two
// parts by 6e-6 (docs/benchmarks.md, "GPU whole model"), so the figures are the
// pack's. The latency sweep times the products as they run.
class QualityX {
 public:
  explicit QualityX(bool gpu) : gpu_(gpu), before_(gpu && quant::cuda::set_split_x_default(true)) {}
  ~QualityX() {
    if (gpu_) quant::cuda::set_split_x_default(before_);
  }
  QualityX(const QualityX&) = delete;
  QualityX& operator=(const QualityX&) = delete;

 private:
  bool gpu_, before_;
};

LatencyResult time_model(exec::PackedModel& pm, const std::vector<LabeledTokens>& texts,
                         const std::vector<std::shared_ptr<const exec::Dispatch>>& dispatches, LatencyOptions lo,
                         const std::string& model, EvalObserver& obs) {
  const int64_t rows = *std::max_element(lo.sweep.begin(), lo.sweep.end());
  obs.on_capturing(model, rows);
  const std::vector<int32_t>& text = texts.front().tokens;
  const exec::MoeInputs inputs = exec::capture_moe_inputs(pm, text, rows, lo.ctx);
  obs.on_stage_start(EvalStage::kLatency, model);
  lo.progress = [&](int64_t done, int64_t total, const std::string& step) { obs.on_progress(done, total, step); };
  LatencyResult r = measure_latency(pm, inputs, text, dispatches, lo);
  obs.on_stage_end();
  return r;
}

}  // namespace

EvalReport run_eval(const EvalRequest& q, EvalObserver* observer) {
  EvalObserver& obs = observer ? *observer : quiet();
  const auto t0 = std::chrono::steady_clock::now();
  PhaseMeter meter;
  meter.start("load");
  exec::PackedModelOptions po;
  po.model_path = q.model;
  po.verify = q.verify;
  po.verify_source_as_read = true;  // the quality pass and collapse checks read the source anyway
  auto pm = exec::open_for_run(q.packed, po, exec::DispatchKind::kAuto, q.runtime);
  const model::ModelConfig& c = pm->config();
  obs.on_loaded(*pm);
  const std::vector<LabeledTokens> texts = read_text_inputs(q.inputs, q.packed, c.vocab_size);
  meter.stop();

  EvalReport r;
  r.tool_version = EQ_VERSION;
  r.model_path = q.model;
  if (!pm->has_reference())
    r.comparison_skipped = "no --model: the packed model ran alone (its own bits per byte/token and latency); the "
                           "unquantized reference, KL, top-1, per-layer error and collapse checks need --model";
  r.machine.cpu = std::string(cpu_model_name());
  r.machine.isa = std::string(isa_name(active_isa()));
  r.machine.threads = default_pool().size();
  r.packed = summarize_pack(pm->manifest(), q.packed);
  r.ctx = q.ctx;
  r.byte_level = c.byte_level();
  for (const auto& t : texts) r.texts.push_back(t.label);

  const bool gpu = q.runtime.device == quant::Device::kCuda;
  {  // the quality passes and collapse checks: x as QualityX says
    const QualityX quality_x(gpu);
    if (gpu) r.machine.gpu_quality_x_split = quant::cuda::split_x();
    if (q.quality) {
      obs.on_stage_start(EvalStage::kQuality, "");
      QualityOptions qo;
      qo.ctx = q.ctx;
      qo.batch_windows = q.batch_windows;
      qo.pass_order = q.pass_order;
      qo.hidden_memory = q.hidden_memory;
      qo.pass_start = [&](const std::string& pass) {
        meter.start("quality " + pass);
        obs.on_pass_start(pass);
      };
      qo.pass_progress = [&](const model::PassProgress& p) { obs.on_pass_progress(p); };
      r.quality = compare_quality(*pm, texts, qo);
      obs.on_stage_end();
      meter.stop();
    }
    if (q.collapse && pm->has_reference()) {
      meter.start("collapse");
      CollapseOptions co = q.collapse_options;
      r.collapse_thresholds = co.thresholds;
      obs.on_stage_start(EvalStage::kCollapse, "");
      co.progress = [&](int64_t done, int64_t total) {
        obs.on_progress(done, total, "reference and packed greedy continuations");
      };
      r.collapse = run_collapse_checks(*pm, domain_prompts(texts, co, c.byte_level()), co);
      obs.on_stage_end();
      meter.stop();
    }
  }
  // Before anything is reported: the figures above are only valid for the
  // checkpoint the folder was packed from.
  if (pm->has_reference()) {
    meter.start("source check");
    if (const uint64_t hashed = pm->finish_source_verification(); hashed > 0) obs.on_source_verified(hashed);
    // The latency sweep runs the packed model alone: the source's converted
    // tensors and mapped pages would only add to its resident set.
    pm->drop_reference();
    meter.stop();
  }
  if (q.latency) {
    meter.start("latency");
    LatencyOptions lo = q.latency_options;
    lo.ctx = q.ctx;
    std::vector<std::shared_ptr<const exec::Dispatch>> dispatches;
    for (const exec::DispatchKind kind : exec::parse_dispatch_option(q.dispatch, /*list=*/true))
      dispatches.push_back(exec::make_dispatch_on(q.runtime, kind));
    r.latency = time_model(*pm, texts, dispatches, lo, "packed", obs);
    if (!q.baseline.empty()) {
      exec::PackedModelOptions bo = po;
      bo.model_path.clear();  // timed only: no reference needed
      auto base = exec::PackedModel::open(q.baseline, bo);
      if (base->manifest().source.fingerprint != pm->manifest().source.fingerprint)
        invalid("--baseline " + q.baseline + ": packed from a different checkpoint than " + q.packed);
      r.baseline = summarize_pack(base->manifest(), q.baseline);
      r.baseline_latency = time_model(*base, texts, dispatches, lo, "baseline", obs);
    }
    meter.stop();
  }
  if (gpu) {
    const exec::cuda::CudaDispatchStats gs = exec::cuda::cuda_dispatch_stats();
    r.machine.experts_device = "cuda";
    r.machine.gpu = exec::cuda::gpu_name();
    r.machine.gpu_layer_uploads = gs.layer_uploads;
    r.machine.gpu_layer_evictions = gs.layer_evictions;
    r.machine.gpu_dense_bytes = exec::cuda::device_dense_bytes();
    r.machine.gpu_dense_cpu_bytes = exec::cuda::device_dense_cpu_bytes();
  }
  r.phases = meter.phases();
  r.machine.peak_rss_bytes = meter.peak_rss_bytes();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace eq::eval

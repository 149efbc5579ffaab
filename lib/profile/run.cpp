#include "profile/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/hash.h"
#include "io/hashes_as_read.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "model/forward.h"
#include "model/layer_pass.h"
#include "model/ops.h"
#include "model/routing.h"
#include "profile/candidate_fit.h"
#include "profile/collector.h"
#include "profile/lossless_source.h"
#include "profile/sensitivity.h"
#include "profile/trace.h"
#include "tokenizer/text_documents.h"

namespace eq::profile {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rows of captured inputs / logits processed per step (bounds the float32 copy).
constexpr int64_t kCapturedRows = 4096;

// A capture's rows are the same tokens at every MoE layer: each tensor must
// hold at least one and as many as the first. `option` and `path` name the
// file; `shape` is the shape the model expects ("[tokens, 64]").
void check_capture_rows(const std::string& option, const std::string& path, const std::string& name, int64_t rows,
                        const std::string& first_name, int64_t first_rows, const std::string& shape) {
  if (rows < 1)
    invalid(option + " " + path + ": tensor " + name + " holds 0 tokens (expected shape " + shape +
            " with tokens >= 1)");
  if (rows != first_rows)
    invalid(option + " " + path + ": tensor " + name + " holds " + std::to_string(rows) + " tokens, " + first_name +
            " " + std::to_string(first_rows) + " (expected shape " + shape + " with the same tokens at every MoE layer)");
}

// A NaN or Inf in a capture is the capture's, not the checkpoint's: refused
// naming the file, tensor and position before it reaches the router.
void check_capture_finite(const std::string& option, const std::string& path, const std::string& name,
                          const std::vector<float>& values, int64_t cols) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  const int64_t i = bad - values.begin();
  invalid(option + " " + path + ": tensor " + name + ": value at [" + std::to_string(i / cols) + ", " +
          std::to_string(i % cols) + "] is " + (std::isnan(*bad) ? "NaN" : "infinite") +
          " (a capture must be finite)");
}

std::vector<std::vector<int32_t>> read_calib_tokens(const ProfileRequest& r, const model::Model& model,
                                                    CalibrationSlice& slice) {
  const std::string& path = r.input_path;
  const model::ModelConfig& c = model.config();
  const auto fmt = io::parse_token_file_format(r.tokens_format);
  if (!fmt) invalid("--tokens-format: unknown value '" + r.tokens_format + "' (auto, json, npy, u32, i32)");
  // Text unless the name or --tokens-format says token ids.
  if (*fmt == io::TokenFileFormat::kAuto && !io::names_token_file(path)) {
    const auto tok = tokenizer::load_tokenizer(model.checkpoint().folder(), c.vocab_size);
    // A slice needs the whole window stream to know its windows; a skip only what it skips.
    const bool sliced = r.slice_count > 1;
    const int64_t cap =
        sliced || r.max_tokens <= 0 || r.max_tokens > std::numeric_limits<int64_t>::max() - r.skip_tokens
            ? 0
            : r.skip_tokens + r.max_tokens;
    // Read whole only without --max-tokens, or for a slice (which --max-tokens does not shorten).
    const std::string advice = sliced ? " (a --slice reads the whole text)" : tokenizer::kPassMaxTokens;
    tokenizer::TextDocuments text =
        tokenizer::read_text_documents(path, *tok, {r.doc_separator, cap}, {/*hash_whole_text=*/true, advice});
    slice.xxh64 = hash_hex(text.xxh64);
    // The whole file's hash names the source of the tokens (what --merge
    // compares); where only its start was read, the rest is hashed a chunk at a time.
    const bool read_prefix = tokenizer::is_byte_tokenizer(*tok) && r.doc_separator.empty() && cap > 0;
    slice.file_xxh64 = read_prefix ? hash_hex(io::text_content_xxh64(path)) : slice.xxh64;
    slice.doc_separator = r.doc_separator;
    slice.kind = "text";
    return std::move(text.documents);
  }
  if (!r.doc_separator.empty())
    invalid("--doc-separator: --calib " + path + " is read as token ids (its sequences are the documents); the "
            "separator applies to text");
  const std::string bytes = io::read_file_bytes(path, io::kMaxTokenFileBytes);
  slice.xxh64 = hash_hex(xxhash64(bytes));
  slice.file_xxh64 = slice.xxh64;
  slice.kind = "tokens";
  io::TokenSequences seqs = io::parse_token_buffer(bytes, *fmt, "--calib " + path);
  io::check_token_range(seqs, c.vocab_size, "--calib " + path);
  return std::move(seqs.sequences);
}

void run_calib(const ProfileRequest& r, model::Model& model, ProfileCollector& collector, CalibrationSlice& slice,
               const std::function<void(int64_t)>& after_layer) {
  if (r.ctx < 1) invalid("--ctx must be at least 1, got " + std::to_string(r.ctx));
  auto seqs = read_calib_tokens(r, model, slice);
  // Windows of ctx tokens (the last of a sequence shorter), capped at max_tokens.
  struct Window {
    const int32_t* tokens;
    int64_t length;
  };
  // The file's window stream, then the slice's part of it.
  std::vector<Window> stream;
  for (const auto& s : seqs)
    for (int64_t b = 0; b < int64_t(s.size()); b += r.ctx)
      stream.push_back({s.data() + b, std::min<int64_t>(r.ctx, int64_t(s.size()) - b)});
  const int64_t W = static_cast<int64_t>(stream.size());
  int64_t first = r.slice_index * W / r.slice_count, last = (r.slice_index + 1) * W / r.slice_count;
  int64_t first_token = 0;
  for (int64_t w = 0; w < first; ++w) first_token += stream[w].length;
  if (r.skip_tokens > 0) {
    int64_t skipped = 0;
    while (first < last && skipped < r.skip_tokens) skipped += stream[first++].length;
    if (skipped != r.skip_tokens)
      invalid("--skip-tokens " + std::to_string(r.skip_tokens) + ": " +
              (skipped < r.skip_tokens ? "the calibration " + std::string(r.slice_count > 1 ? "slice" : "file") +
                                             " " + r.input_path + " holds only " + std::to_string(skipped) + " tokens"
                                       : "falls inside a window of " + std::to_string(r.ctx) +
                                             " tokens (the windows around it start at token " +
                                             std::to_string(skipped - stream[first - 1].length) + " and " +
                                             std::to_string(skipped) + "); skip whole windows"));
    first_token += skipped;
  }
  std::map<int64_t, std::vector<Window>> by_length;
  int64_t total = 0;
  for (int64_t w = first; w < last; ++w) {
    int64_t len = stream[w].length;
    if (r.max_tokens > 0) len = std::min(len, r.max_tokens - total);
    if (len <= 0) break;
    by_length[len].push_back({stream[w].tokens, len});
    total += len;
    ++slice.windows;
  }
  if (total == 0)
    invalid("--calib " + r.input_path + ": empty (no calibration tokens" +
            (r.slice_count > 1 || r.skip_tokens > 0 ? " in this slice)" : ")"));
  slice.first_token = first_token;
  slice.tokens = total;
  slice.ctx = r.ctx;
  // Longest windows first, file order within a length: a fixed order for any thread count.
  std::vector<model::WindowBatch> batches;
  for (auto it = by_length.rbegin(); it != by_length.rend(); ++it) {
    const int64_t len = it->first;
    const auto& windows = it->second;
    for (size_t w0 = 0; w0 < windows.size(); w0 += size_t(r.batch_windows)) {
      model::WindowBatch& b = batches.emplace_back();
      b.batch = std::min<int64_t>(r.batch_windows, int64_t(windows.size() - w0));
      b.seq_len = len;
      b.tokens.resize(b.batch * len);
      for (int64_t w = 0; w < b.batch; ++w)
        std::copy(windows[w0 + w].tokens, windows[w0 + w].tokens + len, b.tokens.begin() + w * len);
    }
  }
  model.set_observer(&collector);
  model::PassOptions po;
  po.order = r.pass_order;
  po.hidden_memory = r.hidden_memory;
  po.spill_dir = r.spill_dir;
  po.progress = [&](const model::PassProgress& p) {
    if (r.pass_progress)
      r.pass_progress(p);
    else if (r.progress && p.order == model::PassOrder::kWindow)
      r.progress("pass", p.tokens_done, p.tokens);
  };
  po.after_layer = after_layer;
  model::run_pass(model, batches, po, [](size_t, model::FloatBuffer&) {});
  model.set_observer(nullptr);
}

void run_hidden(const ProfileRequest& r, const model::ModelConfig& c, const model::WeightStore& weights,
                ProfileCollector& collector, CalibrationSlice& slice) {
  const auto file = io::SafetensorsFile::open(r.input_path);
  slice.kind = "hidden";
  const auto layers = moe_layers(c);
  const std::string shape = "[tokens, " + std::to_string(c.hidden_size) + "] (the model's hidden_size)";
  int64_t total = 0, done = 0;
  for (int64_t l : layers) {
    const std::string name = "moe_input." + std::to_string(l);
    const io::TensorInfo* t = file->find(name);
    if (!t) invalid("--hidden " + r.input_path + ": tensor " + name + " missing (MoE layer " + std::to_string(l) + ")");
    if (t->shape.size() != 2 || t->shape[1] != c.hidden_size)
      invalid("--hidden " + r.input_path + ": tensor " + name + ": shape must be [tokens, " +
              std::to_string(c.hidden_size) + "]");
    const io::TensorInfo& first = *file->find("moe_input." + std::to_string(layers.front()));
    check_capture_rows("--hidden", r.input_path, name, t->shape[0], "moe_input." + std::to_string(layers.front()),
                       first.shape[0], shape);
    total += t->shape[0];
  }
  Xxhash64 h;
  for (int64_t l : layers) {
    const io::TensorInfo& t = *file->find("moe_input." + std::to_string(l));
    const std::vector<float> x = file->view(t).to_f32();
    check_capture_finite("--hidden", r.input_path, t.name, x, c.hidden_size);
    h.update(x.data(), x.size() * sizeof(float));
    const int64_t T = t.shape[0], H = c.hidden_size, E = c.num_experts;
    const model::LayerRouter router = model::load_router(c, weights, l);
    std::vector<float> logits;
    for (int64_t r0 = 0; r0 < T; r0 += kCapturedRows) {
      const int64_t n = std::min(kCapturedRows, T - r0);
      logits.resize(n * E);
      model::router_logits(c, router, x.data() + r0 * H, n, logits.data());
      const model::Routing routing = model::route_layer(c, router, logits.data(), n);
      collector.observe(l, n, x.data() + r0 * H, logits.data(), routing.expert_ids.data(), routing.weights.data());
      done += n;
      if (r.progress) r.progress("pass", done, total);
    }
    if (l == layers.front()) slice.tokens = T;
  }
  slice.xxh64 = hash_hex(h.digest());
}

void run_router_logits(const ProfileRequest& r, const model::ModelConfig& c, const model::WeightStore& weights,
                       ProfileCollector& collector, CalibrationSlice& slice) {
  const int64_t E = c.num_experts;
  if (is_trace_file(r.input_path)) {
    slice.kind = "trace";
    std::map<int64_t, int64_t> per_layer;
    // Dims checked before the first block reaches the collector (ids index its per-expert tables).
    const auto check_dims = [&](const TraceHeader& h) {
      if (h.num_experts != E || h.top_k != c.top_k)
        invalid("--router-logits " + r.input_path + ": trace has " + std::to_string(h.num_experts) + " experts, top-" +
                std::to_string(h.top_k) + "; the model has " + std::to_string(E) + ", top-" + std::to_string(c.top_k));
    };
    const TraceHeader h =
        read_trace(r.input_path, check_dims, [&](int64_t layer, int64_t n, const int32_t* ids, const float* g) {
          collector.observe(layer, n, nullptr, nullptr, ids, g);
          per_layer[layer] += n;
        });
    slice.xxh64 = hash_hex(h.xxh64);  // of the decompressed stream, as for every other source
    slice.tokens = per_layer.empty() ? 0 : per_layer.begin()->second;
    return;
  }
  const auto file = io::SafetensorsFile::open(r.input_path);
  slice.kind = "router_logits";
  const auto layers = moe_layers(c);
  const std::string shape = "[tokens, " + std::to_string(E) + "] (the model's num_experts)";
  // Every layer's shape before any is routed: a bad last layer costs no pass.
  for (int64_t l : layers) {
    const std::string name = "router_logits." + std::to_string(l);
    const io::TensorInfo* t = file->find(name);
    if (!t) invalid("--router-logits " + r.input_path + ": tensor " + name + " missing");
    if (t->shape.size() != 2 || t->shape[1] != E)
      invalid("--router-logits " + r.input_path + ": tensor " + name + ": shape must be [tokens, " +
              std::to_string(E) + "]");
    const std::string first = "router_logits." + std::to_string(layers.front());
    check_capture_rows("--router-logits", r.input_path, name, t->shape[0], first, file->find(first)->shape[0], shape);
  }
  Xxhash64 h;
  for (int64_t l : layers) {
    const std::string name = "router_logits." + std::to_string(l);
    const io::TensorInfo* t = file->find(name);
    const std::vector<float> logits = file->view(*t).to_f32();
    check_capture_finite("--router-logits", r.input_path, name, logits, E);
    h.update(logits.data(), logits.size() * sizeof(float));
    const int64_t T = t->shape[0];
    const model::LayerRouter router = model::load_router(c, weights, l);
    for (int64_t r0 = 0; r0 < T; r0 += kCapturedRows) {
      const int64_t n = std::min(kCapturedRows, T - r0);
      const model::Routing routing = model::route_layer(c, router, logits.data() + r0 * E, n);
      collector.observe(l, n, nullptr, logits.data() + r0 * E, routing.expert_ids.data(), routing.weights.data());
    }
    slice.tokens = T;
  }
  slice.xxh64 = hash_hex(h.digest());
}

}  // namespace

Profile run_profile(const ProfileRequest& r, ProfileRunInfo* info) {
  quant::require_device(r.device);  // before any work
  if (r.slice_count < 1 || r.slice_index < 0 || r.slice_index >= r.slice_count)
    invalid("--slice " + std::to_string(r.slice_index) + "/" + std::to_string(r.slice_count) +
            ": must be I/N with 0 <= I < N");
  if (r.skip_tokens < 0) invalid("--skip-tokens must not be negative, got " + std::to_string(r.skip_tokens));
  if ((r.slice_count > 1 || r.skip_tokens > 0) && r.source != SourceKind::kCalib)
    invalid("--slice and --skip-tokens cut --calib windows; this source is read whole");
  Profile p;
  p.policy = r.policy;
  if (r.min_tokens >= 0) p.policy.min_tokens = r.min_tokens;
  const std::unique_ptr<model::Model> model = model::Model::open(r.model_path);
  // The full hashes are taken as the pass reads each tensor (one read of
  // the checkpoint); those it never reads are hashed after it.
  p.model = plan::fingerprint_metadata(model->weights().checkpoint(), r.model_path);
  io::HashesAsRead hashes(model->weights().source());
  const model::ModelConfig& c = model->config();
  p.lossless_formats = lossless_source_formats(c, model->source());
  if (p.policy.lossless_source_formats) adopt_lossless_formats(p.policy, p.lossless_formats);
  // Formats the experts cannot take are neither measured nor chosen (the
  // profile keeps the policy as given; classification fits it again).
  const Policy fitted = fit_policy(p.policy, c.hidden_size, c.moe_intermediate_size).policy;

  const bool with_inputs = r.source != SourceKind::kRouterLogits;
  const int64_t layers = int64_t(moe_layers(c).size());
  const int64_t capacity = with_inputs && r.sensitivity
                               ? sample_capacity(p.policy.max_samples, p.policy.max_sample_bytes, layers,
                                                 c.num_experts, c.hidden_size)
                               : 0;
  std::unique_ptr<TraceWriter> trace;
  if (!r.save_trace.empty()) trace = std::make_unique<TraceWriter>(r.save_trace, c.num_experts, c.top_k);
  const bool has_probs = !(r.source == SourceKind::kRouterLogits && is_trace_file(r.input_path));
  ProfileCollector collector(c, with_inputs ? &model->weights() : nullptr, has_probs, capacity, p.policy.seed,
                             trace.get());

  SensitivityOptions so;
  so.min_samples = p.policy.min_samples;
  so.proxies = fitted.proxies;
  so.proxy_calibration_experts = p.policy.proxy_calibration_experts;
  so.sample_rows = p.policy.sample_rows;
  so.device = r.device;
  quant::set_trellis_search(r.trellis_search);
  if (r.progress) so.progress = [&](int64_t d, int64_t t) { r.progress("sensitivity", d, t); };
  // The layer-major calib pass measures each MoE layer as soon as its
  // samples are complete, while its weights are held (one read of the layer).
  std::unique_ptr<SensitivityMeter> meter;
  std::function<void(int64_t)> after_layer;
  if (with_inputs && r.sensitivity && r.source == SourceKind::kCalib && r.pass_order == model::PassOrder::kLayer) {
    meter = std::make_unique<SensitivityMeter>(c, model->weights(), collector.stats(), collector.sampler(),
                                               fitted.candidates, so);
    after_layer = [&](int64_t layer) {
      if (c.layer_is_moe.empty() || c.layer_is_moe[layer]) meter->measure_layer(collector.layer_index(layer));
    };
  }
  CalibrationSlice slice;
  slice.path = r.input_path;
  const auto t0 = Clock::now();
  switch (r.source) {
    case SourceKind::kCalib: run_calib(r, *model, collector, slice, after_layer); break;
    case SourceKind::kHidden: run_hidden(r, c, model->weights(), collector, slice); break;
    case SourceKind::kRouterLogits: run_router_logits(r, c, model->weights(), collector, slice); break;
  }
  if (slice.file_xxh64.empty()) slice.file_xxh64 = slice.xxh64;  // captures and logits are read whole
  slice.seconds = since(t0);
  p.seconds_pass = slice.seconds;
  p.calibration.push_back(slice);
  if (trace) {
    trace->finish();
    if (info) {
      info->trace_raw_bytes = trace->raw_bytes();
      info->trace_compressed_bytes = trace->compressed_bytes();
    }
  }
  if (meter) {
    p.sensitivity = meter->finish();
    p.seconds_sensitivity = p.sensitivity.seconds;
    // Measured inside the pass: the pass's own time excludes it.
    p.seconds_pass = slice.seconds = std::max(0.0, slice.seconds - p.seconds_sensitivity);
    p.calibration.back().seconds = slice.seconds;
  }
  p.stats = std::move(collector.stats());

  if (with_inputs && r.sensitivity && !meter) {
    p.sensitivity = measure_sensitivity(c, model->weights(), p.stats, collector.sampler(), fitted.candidates, so);
    p.seconds_sensitivity = p.sensitivity.seconds;
  }
  hashes.finish(p.model.tensors);
  if (info) {
    info->bytes_hashed_as_read = hashes.bytes_hashed_as_read();
    info->bytes_hashed_after = hashes.bytes_hashed_after();
  }
  reclassify(p, r.budget.target_bits, r.budget.target_bytes, r.thresholds, r.budget.max_pack_seconds,
             r.device);
  return p;
}

}  // namespace eq::profile

// The MoE layer on the GPU (device_moe.h): the three dispatch strategies
// over expert batches, each batch through its format's decode or prefill
// product.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"
#include "exec/cuda/device_moe.h"
#include "exec/cuda/row_kernels.cuh"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check;
using quant::cuda::check_launch;
using quant::cuda::stream_of;

namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// out[i, :] = x[token[i], :] for `rows` rows of H floats.
__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ token, int64_t rows,
                                   int64_t H, float* __restrict__ out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* src = x + static_cast<int64_t>(token[r]) * H;
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) out[r * H + i] = src[i];
  }
}

// out[slot[i], :] = in[i, :].
__global__ void scatter_rows_kernel(const float* __restrict__ in, const int32_t* __restrict__ slot, int64_t rows,
                                    int64_t H, float* __restrict__ out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* dst = out + static_cast<int64_t>(slot[r]) * H;
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) dst[i] = in[r * H + i];
  }
}

// out[s, :] += in[s, :] * mask[s] (members get their exact value, others an exact zero).
__global__ void mask_add_kernel(const float* __restrict__ in, const float* __restrict__ mask, int64_t pairs, int64_t H,
                                float* __restrict__ out) {
  for (int64_t r = blockIdx.x; r < pairs; r += gridDim.x) {
    const float m = mask[r];
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) out[r * H + i] += in[r * H + i] * m;
  }
}

// Whether decode calls of several formats share launches (Calls::run, and
// routed decode's run_routed_calls); EXPERTQUANT_GPU_MIXED_LAUNCH=0 gives
// each format its own (for measurement).
bool mixed_launches() {
  static const bool on = env_switch("EXPERTQUANT_GPU_MIXED_LAUNCH", true);
  return on;
}

// The most rows of an expert batch that take the decode products (which
// take x as int8 for most formats); larger batches take the bf16 prefill
// products. EXPERTQUANT_GPU_GEMV_MAX_ROWS=N (0 .. kMaxDeviceGemvRows) lowers
// it from kMaxDeviceGemvRows (for measurement). Read once.
int64_t gemv_max_rows() {
  static const int64_t n = [] {
    const char* v = std::getenv("EXPERTQUANT_GPU_GEMV_MAX_ROWS");
    const int64_t k = quant::kMaxDeviceGemvRows;
    return v == nullptr ? k : std::clamp<int64_t>(std::atoll(v), 0, k);
  }();
  return n;
}

// Whether a format's decode products take part in launches of several formats.
bool joins_mixed(const quant::FormatTraits* f) { return mixed_launches() && f->device_gemv->segment != nullptr; }

const float* floats_or_null(const DeviceBuffer& b) { return b.size() ? b.floats() : nullptr; }

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535)); }

// One expert batch: m rows of x (device, contiguous) into m rows of y, its
// intermediates in rows [row0, row0 + m) of g, u, h.
struct Batch {
  int32_t expert = 0;
  const float* x = nullptr;
  float* y = nullptr;
  int64_t m = 0, row0 = 0;
};

// The calls of one projection step: the jobs of one (format, shape, rows of
// x) per decode call, of one (format, shape) per prefill call (m = 0).
struct Calls {
  using Key = std::tuple<const quant::FormatTraits*, int64_t, int64_t, int64_t>;
  struct Call {
    std::vector<quant::DeviceGemvJob> gemv;
    std::vector<quant::DeviceGemmJob> gemm;
    int64_t max_m = 0;
  };
  std::map<Key, Call> calls;

  // x_up: a decode job's gated input (DeviceGemvJob::x_up), or null.
  void add(const DeviceMatrix& w, const float* x, float* y, int64_t m, const float* x_up = nullptr) {
    const bool decode = m <= gemv_max_rows();
    Call& c = calls[{w.format, w.rows, w.cols, decode ? m : 0}];
    if (decode) {
      c.gemv.push_back(w.job(x, y));
      c.gemv.back().x_up = x_up;
    } else {
      c.gemm.push_back(gemm_job(w, x, y, m));
    }
    c.max_m = std::max(c.max_m, m);
  }
  size_t scratch_bytes() const {
    size_t need = 0;
    for (const auto& [key, c] : calls) {
      const auto& [f, rows, cols, m] = key;
      if (m > 0 && f->device_gemv->scratch_bytes)
        need = std::max(need, f->device_gemv->scratch_bytes(*f, rows, cols, static_cast<int>(c.gemv.size()),
                                                            static_cast<int>(m)));
      if (m == 0 && f->device_gemm->scratch_bytes)
        need = std::max(need, f->device_gemm->scratch_bytes(*f, rows, cols, c.max_m));
    }
    return need;
  }
  // The one-row decode calls of one shape whose formats take part in
  // launches of several formats run as one (quant::cuda::run_gemv_calls)
  // when there are several of them; every other call is its format's own.
  void run(void* scratch, void* stream) const {
    std::map<std::pair<int64_t, int64_t>, std::vector<quant::DeviceGemvCall>> shared;
    for (const auto& [key, c] : calls) {
      const auto& [f, rows, cols, m] = key;
      if (m == 1 && joins_mixed(f)) shared[{rows, cols}].push_back({f, c.gemv.data(), static_cast<int>(c.gemv.size())});
    }
    for (auto it = shared.begin(); it != shared.end();) {
      if (it->second.size() == 1) {
        it = shared.erase(it);  // one format: its own launch
        continue;
      }
      quant::cuda::run_gemv_calls(it->first.first, it->first.second, 1, it->second.data(),
                                  static_cast<int>(it->second.size()), stream);
      ++it;
    }
    for (const auto& [key, c] : calls) {
      const auto& [f, rows, cols, m] = key;
      if (m == 1 && joins_mixed(f) && shared.count({rows, cols})) continue;  // ran above
      if (m > 0)
        f->device_gemv->run(*f, rows, cols, c.gemv.data(), static_cast<int>(c.gemv.size()), static_cast<int>(m),
                            scratch, stream);
      else
        f->device_gemm->run(*f, rows, cols, c.gemm.data(), static_cast<int>(c.gemm.size()), scratch, stream);
    }
  }
};

// The device regions of one call, carved from scratch.work.
struct Regions {
  float *rows_in = nullptr, *g = nullptr, *u = nullptr, *h = nullptr, *rows_out = nullptr, *group_out = nullptr,
        *mask = nullptr;
  int32_t *token = nullptr, *slot = nullptr;
};

Regions carve(DeviceMoeScratch& s, int64_t pairs, int64_t H, int64_t I, void* stream) {
  const size_t ph = aligned(static_cast<size_t>(pairs * H) * 4), pi = aligned(static_cast<size_t>(pairs * I) * 4),
               p4 = aligned(static_cast<size_t>(pairs) * 4);
  grow(s.work, 3 * ph + 3 * pi + 3 * p4, stream);
  char* at = static_cast<char*>(s.work.data());
  Regions r;
  auto take = [&](size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  r.rows_in = reinterpret_cast<float*>(take(ph));
  r.rows_out = reinterpret_cast<float*>(take(ph));
  r.group_out = reinterpret_cast<float*>(take(ph));
  r.g = reinterpret_cast<float*>(take(pi));
  r.u = reinterpret_cast<float*>(take(pi));
  r.h = reinterpret_cast<float*>(take(pi));
  r.mask = reinterpret_cast<float*>(take(p4));
  r.token = reinterpret_cast<int32_t*>(take(p4));
  r.slot = reinterpret_cast<int32_t*>(take(p4));
  return r;
}

const DeviceExpert& expert_of(const DeviceMoeLayer& L, int32_t id) {
  return L.experts[static_cast<size_t>(L.index_of[static_cast<size_t>(id)])];
}
const DeviceExpertBiases& biases_of(const DeviceMoeLayer& L, int32_t id) {
  return L.biases[static_cast<size_t>(L.index_of[static_cast<size_t>(id)])];
}

// Batches that run in order on one stream: their intermediates are the rows
// [row0, row0 + rows) of g, u and h, their products' scratch the bytes
// [scratch_at, scratch_at + scratch_bytes) of DeviceMoeScratch::call.
struct Lane {
  std::vector<Batch> batches;
  Calls up, down;
  bool gated = false;  // down forms SwiGLU from g and u itself (DeviceGemvJob::x_up)
  int64_t row0 = 0, rows = 0;
  size_t scratch_at = 0, scratch_bytes = 0;
};

// Whether a lane's down products form SwiGLU from g and u themselves: decode
// batches of a plain SwiGLU layer whose down formats take a gated input (in
// their own launches and, every family that takes part in them taking one,
// in launches of several formats).
bool lane_gates_down(const DeviceMoeLayer& L, std::span<const Batch> batches) {
  if (L.biased || L.act.kind != model::ActivationKind::kSwiGlu) return false;
  for (const Batch& b : batches)
    if (b.m > gemv_max_rows() || !gated_down(b.m, L.inter) ||
        b.m > expert_of(L, b.expert).down.format->device_gemv->gated_rows)
      return false;
  return true;
}

// Whether all three products of an expert take part in launches of several formats.
bool expert_joins_mixed(const DeviceExpert& e) {
  return joins_mixed(e.gate.format) && joins_mixed(e.up.format) && joins_mixed(e.down.format);
}

// gate and up (Calls::run: one launch per format, shape and row count, or
// one for the one-row calls of several formats), the activation over the
// lane's rows (or in down's input), down, down's biases.
void run_lane(const DeviceMoeLayer& L, const Lane& lane, const Regions& r, void* call, void* stream) {
  const int64_t I = L.inter;
  lane.up.run(call, stream);
  const cudaStream_t st = stream_of(stream);
  const int kind = static_cast<int>(L.act.kind);
  if (!lane.gated && !L.biased) {
    // One launch over the lane's rows: no per-expert values.
    glu_rows_kernel<<<elementwise_blocks(lane.rows * I), 256, 0, st>>>(
        r.g + lane.row0 * I, r.u + lane.row0 * I, r.h + lane.row0 * I, lane.rows, I, nullptr, nullptr, kind,
        L.act.alpha, L.act.limit);
  } else if (!lane.gated) {
    for (const Batch& b : lane.batches) {
      const DeviceExpertBiases& eb = biases_of(L, b.expert);
      glu_rows_kernel<<<elementwise_blocks(b.m * I), 256, 0, st>>>(r.g + b.row0 * I, r.u + b.row0 * I, r.h + b.row0 * I,
                                                                  b.m, I, floats_or_null(eb.gate), floats_or_null(eb.up),
                                                                  kind, L.act.alpha, L.act.limit);
    }
  }
  check_launch("activation kernel");
  lane.down.run(call, stream);
  if (L.biased)
    for (const Batch& b : lane.batches) {
      const DeviceExpertBiases& eb = biases_of(L, b.expert);
      if (eb.down.size())
        add_bias_rows_kernel<<<elementwise_blocks(b.m * L.hidden), 256, 0, st>>>(b.y, b.m, L.hidden, eb.down.floats());
    }
  check_launch("down bias kernel");
}

// Every batch through its expert. When all are decode batches, each bit
// group's batches form a lane (LaneStreams), except that with one row a
// batch and few batches the groups whose formats share launches
// (Calls::run) form one lane together; each lane takes the rows of g, u, h
// after the lanes before.
// Otherwise one lane on `stream` keeps the batches' rows (a prefill product's
// scratch is large: the lanes do not each get one).
void run_batches(const DeviceMoeLayer& L, const std::vector<Batch>& batches, int64_t total_rows, const Regions& r,
                 DeviceMoeScratch& s, void* stream) {
  const int64_t I = L.inter;
  bool decode = true, one_row = true;
  for (const Batch& b : batches) {
    decode = decode && b.m <= gemv_max_rows();
    one_row = one_row && b.m == 1;
  }
  std::vector<Lane> lanes;
  if (decode) {
    // A launch of several formats holds 3 blocks an SM where the 4-bit rows'
    // own kernels hold 4: past one wave of gate and up blocks, the groups'
    // own launches side by side are faster (docs/benchmarks.md, "GPU MoE
    // layer": a token on the Qwen3-235B-A22B layer, two waves).
    auto mixed_blocks = [&](int32_t id) {
      return L.mixed_blocks[static_cast<size_t>(L.index_of[static_cast<size_t>(id)])];
    };
    bool share = one_row;
    if (share) {
      int64_t blocks = 0;
      for (const Batch& b : batches) blocks += std::max<int64_t>(mixed_blocks(b.expert), 0);
      share = blocks <= L.mixed_wave;
    }
    std::vector<int32_t> lane_of_group(L.groups.size(), -1);
    int32_t mixed_lane = -1;
    for (const Batch& b : batches) {
      int32_t& at = share && mixed_blocks(b.expert) >= 0
                        ? mixed_lane
                        : lane_of_group[static_cast<size_t>(L.group_of[static_cast<size_t>(b.expert)])];
      if (at < 0) {
        at = static_cast<int32_t>(lanes.size());
        lanes.emplace_back();
      }
      lanes[static_cast<size_t>(at)].batches.push_back(b);
    }
    int64_t next = 0;
    for (Lane& lane : lanes) {
      lane.row0 = next;
      for (Batch& b : lane.batches) {
        b.row0 = next;
        next += b.m;
      }
      lane.rows = next - lane.row0;
    }
  } else {
    lanes.emplace_back().batches = batches;
    lanes.back().rows = total_rows;
  }
  size_t scratch = 0;
  for (Lane& lane : lanes) {
    lane.gated = lane_gates_down(L, lane.batches);
    for (const Batch& b : lane.batches) {
      const DeviceExpert& e = expert_of(L, b.expert);
      lane.up.add(e.gate, b.x, r.g + b.row0 * I, b.m);
      lane.up.add(e.up, b.x, r.u + b.row0 * I, b.m);
      if (lane.gated) lane.down.add(e.down, r.g + b.row0 * I, b.y, b.m, r.u + b.row0 * I);
      else lane.down.add(e.down, r.h + b.row0 * I, b.y, b.m);
    }
    lane.scratch_at = scratch;
    lane.scratch_bytes = aligned(std::max(lane.up.scratch_bytes(), lane.down.scratch_bytes()));
    scratch += lane.scratch_bytes;
  }
  grow(s.call, scratch, stream);
  const int n = static_cast<int>(lanes.size());
  s.lanes.fork(n, stream);
  for (int i = 0; i < n; ++i) {
    const Lane& lane = lanes[static_cast<size_t>(i)];
    void* call = lane.scratch_bytes ? static_cast<char*>(s.call.data()) + lane.scratch_at : nullptr;
    run_lane(L, lane, r, call, s.lanes.lane(i, stream));
  }
  s.lanes.join(n, stream);
}

void check_ids(const DeviceMoeLayer& L, const int32_t* ids, int64_t pairs) {
  for (int64_t s = 0; s < pairs; ++s) {
    const int32_t id = ids[s];
    if (id < 0 || id >= L.num_experts || L.index_of[static_cast<size_t>(id)] < 0)
      invalid("GPU MoE layer: pair " + std::to_string(s) + " is routed to expert " + std::to_string(id) +
              (id >= 0 && id < L.num_experts ? ", which was pruned" : " of " + std::to_string(L.num_experts)));
  }
}

// Counting sort of the pairs by `ids` into batches of gathered rows
// (rows_in -> rows_out), the pairs' rows scattered into `out` after.
void grouped(const DeviceMoeLayer& L, const float* x, int64_t tokens, int64_t top_k, const int32_t* ids, float* out,
             const Regions& r, DeviceMoeScratch& s, void* stream) {
  const int64_t pairs = tokens * top_k, H = L.hidden, E = L.num_experts;
  s.offsets.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t p = 0; p < pairs; ++p) ++s.offsets[static_cast<size_t>(ids[p]) + 1];
  for (int64_t e = 0; e < E; ++e) s.offsets[e + 1] += s.offsets[e];
  s.order.resize(static_cast<size_t>(pairs));
  std::vector<int64_t> next(s.offsets.begin(), s.offsets.end() - 1);
  for (int64_t p = 0; p < pairs; ++p) s.order[static_cast<size_t>(next[static_cast<size_t>(ids[p])]++)] = p;
  std::vector<Batch> batches;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = s.offsets[e], end = s.offsets[e + 1];
    if (b == end) continue;
    batches.push_back({.expert = static_cast<int32_t>(e), .x = r.rows_in + b * H, .y = r.rows_out + b * H,
                       .m = end - b, .row0 = b});
  }
  const cudaStream_t st = stream_of(stream);
  s.order32.resize(static_cast<size_t>(2 * pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    s.order32[static_cast<size_t>(i)] = static_cast<int32_t>(s.order[static_cast<size_t>(i)] / top_k);
    s.order32[static_cast<size_t>(pairs + i)] = static_cast<int32_t>(s.order[static_cast<size_t>(i)]);
  }
  // Pageable copies: the host arrays are staged before the calls return, so they may be refilled at once.
  check(cudaMemcpyAsync(r.token, s.order32.data(), static_cast<size_t>(pairs) * 4, cudaMemcpyHostToDevice, st),
        "copy the gather order");
  check(cudaMemcpyAsync(r.slot, s.order32.data() + pairs, static_cast<size_t>(pairs) * 4, cudaMemcpyHostToDevice, st),
        "copy the scatter order");
  gather_rows_kernel<<<row_blocks(pairs), 256, 0, st>>>(x, r.token, pairs, H, r.rows_in);
  check_launch("gather kernel");
  run_batches(L, batches, pairs, r, s, stream);
  scatter_rows_kernel<<<row_blocks(pairs), 256, 0, st>>>(r.rows_out, r.slot, pairs, H, out);
  check_launch("scatter kernel");
}

std::vector<Batch> per_pair_batches(const float* x, int64_t tokens, int64_t top_k, int64_t H, const int32_t* ids,
                                    float* slot_out) {
  std::vector<Batch> batches(static_cast<size_t>(tokens * top_k));
  for (int64_t p = 0; p < tokens * top_k; ++p) {
    Batch& b = batches[static_cast<size_t>(p)];
    b.expert = ids[p];
    b.x = x + (p / top_k) * H;
    b.y = slot_out + p * H;
    b.m = 1;
    b.row0 = p;
  }
  return batches;
}

// h = silu(g) * u over the rows of the pairs whose expert is in bit group
// `group` (routed decode, a group whose down takes no gated input): each
// group's lane forms only its own pairs' rows, so the lanes need not meet.
__global__ void routed_glu_kernel(const quant::RoutedPairs r, int64_t pairs, int64_t width, const float* g,
                                  const float* u, float* h) {
  for (int64_t p = blockIdx.y; p < pairs; p += gridDim.y) {
    const int32_t e = r.expert_ids[p];
    if (e < 0 || e >= r.experts || r.group_of[e] != r.group) continue;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < width;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      h[p * width + i] = quant::cuda::swiglu_device(g[p * width + i], u[p * width + i]);
  }
}

// Whether routed decode runs each bit group on a lane of its own (the
// default) or all of them in turn on the caller's stream:
// EXPERTQUANT_GPU_ROUTED_LANES=0, for measurement. Read once.
bool routed_lanes() {
  static const bool on = env_switch("EXPERTQUANT_GPU_ROUTED_LANES", true);
  return on;
}

// Whether routed decode takes layer d (DeviceMoeLayer::routed), and its groups.
void plan_routed(DeviceMoeLayer& d) {
  d.routed = false;
  // Routed decode runs one-row decode products only: not when they are off (EXPERTQUANT_GPU_GEMV_MAX_ROWS=0).
  if (d.biased || d.act.kind != model::ActivationKind::kSwiGlu || d.groups.empty() || gemv_max_rows() < 1) return;
  std::vector<DeviceMoeLayer::RoutedGroup> groups;
  for (const std::vector<int32_t>& members : d.groups) {
    DeviceMoeLayer::RoutedGroup rg;
    for (int32_t id : members) {
      const DeviceExpert& e = expert_of(d, id);
      if (rg.up == nullptr) rg.up = e.gate.format, rg.down = e.down.format;
      if (e.gate.format != rg.up || e.up.format != rg.up || e.down.format != rg.down) return;
    }
    if (rg.up->device_gemv->run_routed == nullptr || rg.down->device_gemv->run_routed == nullptr) return;
    rg.gated = rg.down->device_gemv->gated_rows >= 1 && gated_down(1, d.inter);
    groups.push_back(rg);
  }
  // The groups whose products run in launches of several formats share one
  // a projection step when there are two or more of them (with the gated
  // input, which every such family takes with one row of x).
  std::vector<const quant::FormatTraits*> up(groups.size()), down(groups.size());
  int shared = 0;
  for (size_t g = 0; g < groups.size(); ++g)
    if (joins_mixed(groups[g].up) && joins_mixed(groups[g].down) && groups[g].gated) {
      up[g] = groups[g].up, down[g] = groups[g].down;
      ++shared;
    }
  if (shared >= 2 && groups.size() <= static_cast<size_t>(quant::cuda::kMaxRoutedGroups)) {
    for (size_t g = 0; g < groups.size(); ++g) {
      groups[g].shared = up[g] != nullptr;
      if (groups[g].shared)
        d.routed_shared_blocks =
            std::max(d.routed_shared_blocks, 2 * quant::cuda::mixed_gemv_blocks(*up[g], d.inter, d.hidden));
    }
    d.routed_shared_up = std::move(up);
    d.routed_shared_down = std::move(down);
  }
  std::vector<quant::DeviceGemvJob> parts(static_cast<size_t>(3 * d.num_experts));
  for (int64_t id = 0; id < d.num_experts; ++id) {
    if (d.index_of[static_cast<size_t>(id)] < 0) continue;
    const DeviceExpert& e = expert_of(d, static_cast<int32_t>(id));
    parts[static_cast<size_t>(3 * id)] = e.gate.job(nullptr, nullptr);
    parts[static_cast<size_t>(3 * id + 1)] = e.up.job(nullptr, nullptr);
    parts[static_cast<size_t>(3 * id + 2)] = e.down.job(nullptr, nullptr);
  }
  d.routed_group_of = DeviceBuffer(d.group_of.size() * sizeof(int32_t));
  d.routed_group_of.upload(d.group_of.data(), d.group_of.size() * sizeof(int32_t));
  d.routed_parts = DeviceBuffer(parts.size() * sizeof(quant::DeviceGemvJob));
  d.routed_parts.upload(parts.data(), parts.size() * sizeof(quant::DeviceGemvJob));
  d.routed_groups = std::move(groups);
  d.routed = true;
}

}  // namespace

void run_moe_routed(const DeviceMoeLayer& L, const float* x, int64_t tokens, int64_t top_k, const int32_t* ids,
                    float* slot_out, DeviceMoeScratch& s, void* stream) {
  EQ_CHECK(L.routed, "GPU MoE layer: routed decode on a layer that does not take it");
  const int64_t pairs = tokens * top_k, H = L.hidden, I = L.inter;
  if (pairs <= 0) return;
  EQ_CHECK(pairs <= kMaxRoutedPairs, "GPU MoE layer: routed decode of " + std::to_string(pairs) + " pairs (at most " +
                                         std::to_string(kMaxRoutedPairs) + ")");
  const int groups = static_cast<int>(L.routed_groups.size());
  // The shared groups' launches (lane 0) when the call's blocks fit one wave
  // (DeviceMoeLayer::routed_shared_blocks), then each other group on a lane
  // of its own, as the per-pair path's: gate and up, SwiGLU of its own pairs
  // where down does not form it, down.
  const bool shared = !L.routed_shared_up.empty() && pairs * L.routed_shared_blocks <= L.mixed_wave;
  int own = 0;
  for (const DeviceMoeLayer::RoutedGroup& rg : L.routed_groups) own += shared && rg.shared ? 0 : 1;
  const int lanes = routed_lanes() ? own + (shared ? 1 : 0) : 1;
  // g, u, h, then a lane's room for x quantized once (RoutedPairs::x_scratch).
  const size_t rows = aligned(static_cast<size_t>(pairs * I) * sizeof(float));
  const size_t x_room =
      aligned(std::max(quant::routed_x_bytes(pairs / top_k, H), quant::routed_x_bytes(pairs, I)));  // gate/up, down
  grow(s.work, 3 * rows + static_cast<size_t>(lanes) * x_room, stream);
  float* g = s.work.floats();
  float* u = reinterpret_cast<float*>(static_cast<char*>(s.work.data()) + rows);
  float* h = reinterpret_cast<float*>(static_cast<char*>(s.work.data()) + 2 * rows);
  auto x_scratch_of = [&](int lane) {
    return x_room ? static_cast<unsigned char*>(s.work.data()) + 3 * rows + static_cast<size_t>(lane) * x_room : nullptr;
  };
  quant::RoutedPairs r;
  r.expert_ids = ids;
  r.group_of = static_cast<const int32_t*>(L.routed_group_of.data());
  r.products = static_cast<const quant::DeviceGemvJob*>(L.routed_parts.data());
  r.experts = static_cast<int32_t>(L.num_experts);
  r.top_k = static_cast<int32_t>(top_k);
  const int n = static_cast<int>(pairs);
  // A projection step's inputs and outputs: gate and up from x into g and u;
  // down from `in` (and in_up: its gated input) into the pairs' slots.
  auto gate_up_step = [&] {
    r.step = quant::RoutedPairs::kGateUp;
    r.x = x, r.x_up = nullptr, r.x_stride = H;
    r.y_gate = g, r.y_up = u, r.y_stride = I;
  };
  auto down_step = [&](const float* in, const float* in_up) {
    r.step = quant::RoutedPairs::kDown;
    r.x = in, r.x_up = in_up, r.x_stride = I;
    r.y_gate = slot_out, r.y_up = nullptr, r.y_stride = H;
  };
  s.lanes.fork(lanes, stream);
  if (shared) {
    void* lane = s.lanes.lane(0, stream);
    gate_up_step();
    quant::cuda::run_routed_calls(I, H, L.routed_shared_up.data(), groups, r, n, lane);
    down_step(g, u);
    quant::cuda::run_routed_calls(H, I, L.routed_shared_down.data(), groups, r, n, lane);
  }
  int next_lane = shared ? 1 : 0;
  for (int gi = 0; gi < groups; ++gi) {
    const DeviceMoeLayer::RoutedGroup& rg = L.routed_groups[static_cast<size_t>(gi)];
    if (shared && rg.shared) continue;
    const int lane_index = lanes > 1 ? next_lane++ : 0;
    void* lane = s.lanes.lane(lane_index, stream);
    r.group = gi;
    r.x_scratch = x_scratch_of(lane_index);
    gate_up_step();
    rg.up->device_gemv->run_routed(*rg.up, I, H, r, n, lane);
    if (!rg.gated) {
      routed_glu_kernel<<<dim3(static_cast<unsigned>((I + 255) / 256), static_cast<unsigned>(pairs)), 256, 0,
                          stream_of(lane)>>>(r, pairs, I, g, u, h);
      check_launch("routed activation kernel");
    }
    down_step(rg.gated ? g : h, rg.gated ? u : nullptr);
    rg.down->device_gemv->run_routed(*rg.down, H, I, r, n, lane);
  }
  s.lanes.join(lanes, stream);
}

void expert_mlp_decode(std::span<const DeviceExpert* const> experts, const float* x, int m_rows, float* out,
                       DeviceBuffer& scratch, void* stream) {
  if (experts.empty()) return;
  const int64_t I = experts[0]->gate.rows, H = experts[0]->gate.cols;
  const int64_t n = static_cast<int64_t>(experts.size());
  for (const DeviceExpert* e : experts)
    EQ_CHECK(e->gate.rows == I && e->gate.cols == H && e->up.rows == I && e->up.cols == H && e->down.rows == H &&
                 e->down.cols == I,
             "GPU decode: the experts of one call differ in shape");
  bool gated = gated_down(m_rows, I);
  for (const DeviceExpert* e : experts) gated = gated && m_rows <= e->down.format->device_gemv->gated_rows;
  // scratch: g, u and h [n][m_rows][I], then the products' scratch.
  const int64_t rows = n * m_rows;
  const size_t gu_bytes = aligned(static_cast<size_t>(3 * rows * I) * sizeof(float));
  Calls up, down;
  auto plan = [&](float* g) {
    up = {}, down = {};
    float *u = g + rows * I, *h = u + rows * I;
    for (int64_t j = 0; j < n; ++j) {
      const DeviceExpert& e = *experts[static_cast<size_t>(j)];
      const int64_t at = j * m_rows * I;
      up.add(e.gate, x, g + at, m_rows);
      up.add(e.up, x, u + at, m_rows);
      down.add(e.down, gated ? g + at : h + at, out + j * m_rows * H, m_rows, gated ? u + at : nullptr);
    }
    return gu_bytes + std::max(up.scratch_bytes(), down.scratch_bytes());
  };
  grow(scratch, gu_bytes, stream);
  const size_t need = plan(scratch.floats());
  if (need > scratch.size()) {  // the jobs point into the buffer: plan again in the larger one
    grow(scratch, need, stream);
    plan(scratch.floats());
  }
  float* g = scratch.floats();
  void* call = static_cast<char*>(scratch.data()) + gu_bytes;
  up.run(call, stream);
  if (!gated) {
    glu_rows_kernel<<<elementwise_blocks(rows * I), 256, 0, stream_of(stream)>>>(
        g, g + rows * I, g + 2 * rows * I, rows, I, nullptr, nullptr, static_cast<int>(model::ActivationKind::kSwiGlu),
        0.0f, 0.0f);
    check_launch("activation kernel");
  }
  down.run(call, stream);
}

quant::DeviceGemmJob gemm_job(const DeviceMatrix& m, const float* x, float* y, int64_t m_rows) {
  quant::DeviceGemmJob j;
  for (size_t p = 0; p < m.parts.size(); ++p) j.parts[p] = m.parts[p].data();
  j.x = x;
  j.y = y;
  j.m_rows = m_rows;
  return j;
}

void gemm(const quant::FormatTraits& format, int64_t rows, int64_t cols, std::span<const quant::DeviceGemmJob> jobs,
          DeviceBuffer& scratch, void* stream) {
  if (format.device_gemm == nullptr)
    unsupported("GPU prefill: format " + std::string(format.name) + " has no GPU kernel");
  if (jobs.empty()) return;
  int64_t max_m = 0;
  for (const auto& j : jobs) max_m = std::max(max_m, j.m_rows);
  const size_t need = format.device_gemm->scratch_bytes ? format.device_gemm->scratch_bytes(format, rows, cols, max_m) : 0;
  grow(scratch, need, stream);
  format.device_gemm->run(format, rows, cols, jobs.data(), static_cast<int>(jobs.size()), need ? scratch.data() : nullptr,
                          stream);
}

DeviceMoeLayer upload(const PackedLayer& layer) {
  DeviceMoeLayer d;
  d.num_experts = layer.num_experts;
  d.mixed_wave = quant::cuda::mixed_gemv_wave();
  d.index_of.assign(static_cast<size_t>(layer.num_experts), -1);
  d.group_of.assign(static_cast<size_t>(layer.num_experts), -1);
  for (const BitGroup& g : layer.groups) {
    if (g.expert_ids.empty()) continue;
    const int32_t gi = static_cast<int32_t>(d.groups.size());
    d.groups.emplace_back();
    for (size_t slot = 0; slot < g.expert_ids.size(); ++slot) {
      const ExpertWeights& w = g.slots[slot];
      if (g.format->device_gemm == nullptr)
        unsupported("GPU prefill: format " + std::string(g.format->name) + " has no GPU kernel");
      const int32_t id = static_cast<int32_t>(g.expert_ids[slot]);
      d.index_of[static_cast<size_t>(id)] = static_cast<int32_t>(d.experts.size());
      d.group_of[static_cast<size_t>(id)] = gi;
      d.groups.back().push_back(id);
      d.experts.push_back({upload(w.gate), upload(w.up), upload(w.down)});
      const DeviceExpert& e = d.experts.back();
      if (d.experts.size() == 1) {
        d.hidden = e.gate.cols;
        d.inter = e.gate.rows;
        d.act = w.act;
      }
      if (!(w.act == d.act))
        unsupported("GPU MoE layer: expert " + std::to_string(id) + "'s activation differs from the layer's first");
      DeviceExpertBiases& eb = d.biases.emplace_back();
      auto bias = [&](DeviceBuffer& dst, const float* src, int64_t n) {
        if (src == nullptr) return;
        dst = DeviceBuffer(static_cast<size_t>(n) * sizeof(float));
        dst.upload(src, static_cast<size_t>(n) * sizeof(float));
        d.biased = true;
      };
      bias(eb.gate, w.gate_bias, e.gate.rows);
      bias(eb.up, w.up_bias, e.up.rows);
      bias(eb.down, w.down_bias, e.down.rows);
      EQ_CHECK(e.gate.rows == d.inter && e.gate.cols == d.hidden && e.up.rows == d.inter && e.up.cols == d.hidden &&
                   e.down.rows == d.hidden && e.down.cols == d.inter,
               "GPU MoE layer: expert " + std::to_string(id) + " differs in shape from the layer's first");
      d.nbytes += e.gate.nbytes + e.up.nbytes + e.down.nbytes;
      d.mixed_blocks.push_back(expert_joins_mixed(e)
                                   ? quant::cuda::mixed_gemv_blocks(*e.gate.format, e.gate.rows, e.gate.cols) +
                                         quant::cuda::mixed_gemv_blocks(*e.up.format, e.up.rows, e.up.cols)
                                   : -1);
    }
  }
  plan_routed(d);
  return d;
}

void run_moe(const DeviceMoeLayer& L, DispatchKind kind, int64_t sort_cutoff, const float* x, int64_t tokens,
             int64_t top_k, const int32_t* ids, float* slot_out, DeviceMoeScratch& s, void* stream) {
  const int64_t pairs = tokens * top_k, H = L.hidden, I = L.inter;
  if (pairs <= 0) return;
  check_ids(L, ids, pairs);
  const Regions r = carve(s, pairs, H, I, stream);
  if (kind == DispatchKind::kAuto && tokens <= sort_cutoff)
    return run_batches(L, per_pair_batches(x, tokens, top_k, H, ids, slot_out), pairs, r, s, stream);
  if (kind != DispatchKind::kMaskCombine) return grouped(L, x, tokens, top_k, ids, slot_out, r, s, stream);
  // Mask-combine: every group's pass over all pairs (remapped), masked, added.
  const cudaStream_t st = stream_of(stream);
  s.remapped.resize(static_cast<size_t>(pairs));
  s.mask.resize(static_cast<size_t>(pairs));
  check(cudaMemsetAsync(slot_out, 0, static_cast<size_t>(pairs * H) * 4, st), "clear slot_out");
  for (const std::vector<int32_t>& g : L.groups) {
    const int32_t gi = L.group_of[static_cast<size_t>(g[0])];
    for (int64_t p = 0; p < pairs; ++p) {
      const bool member = L.group_of[static_cast<size_t>(ids[p])] == gi;
      s.mask[static_cast<size_t>(p)] = member ? 1.0f : 0.0f;
      s.remapped[static_cast<size_t>(p)] = member ? ids[p] : g[0];
    }
    check(cudaMemcpyAsync(r.mask, s.mask.data(), static_cast<size_t>(pairs) * 4, cudaMemcpyHostToDevice, st),
          "copy the mask");
    grouped(L, x, tokens, top_k, s.remapped.data(), r.group_out, r, s, stream);
    mask_add_kernel<<<row_blocks(pairs), 256, 0, st>>>(r.group_out, r.mask, pairs, H, slot_out);
    check_launch("mask-combine kernel");
  }
}

}  // namespace eq::exec::cuda

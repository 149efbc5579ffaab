// The trellis tile search on the GPU: Viterbi::run_tail_biting (L = 16,
// K = 2, 3, 4) for many 16x16 tiles at once, one thread block per tile at a
// time (a persistent grid). The step is viterbi_step_generic's: the same
// strict-less argmin over predecessors (lowest j on ties), the same
// fmaf(code, fmaf(code, weight, linear), best), the lowest admissible final
// state on ties; so the states equal the CPU's bit for bit. The rest of the
// trellis quantizer (rotations, row scales, importance feedback, refit,
// packing) is quantize_matrix's own, fed by this search.
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"
#include "quant/trellis/viterbi.h"

namespace eq::quant::cuda {

namespace {

constexpr int kL = 16;
constexpr int kStates = 1 << kL;
constexpr int kT = 256;  // one 16x16 tile
constexpr int kThreads = 512;
static_assert(kT <= trellis::kOverlapWindow, "the free pass covers the whole tile");

template <int K>
struct Shape {
  static constexpr int groups = kStates >> K;
  static constexpr int fan = 1 << K;
  static constexpr int plane_bytes = groups / 8;
  static constexpr int step_bytes = plane_bytes * K;
  static constexpr uint32_t overlap_mask = (1u << (kL - K)) - 1;
};

// One Viterbi pass over kT steps (Viterbi::run): target/weight in shared
// memory; states[kT] out (shared). overlap < 0: free start.
template <int K>
__device__ void run_pass(const float* codes, const float* target, const float* weight, int overlap, float* cost_a,
                         float* cost_b, uint8_t* planes, uint32_t* states, float* red_cost, uint32_t* red_idx) {
  using S = Shape<K>;
  const int tid = threadIdx.x, lane = tid & 31;
  const float inf = __int_as_float(0x7f800000);
  for (int s = tid; s < kStates; s += kThreads)
    cost_a[s] = (overlap < 0 || (s & S::overlap_mask) == static_cast<uint32_t>(overlap)) ? 0.0f : inf;
  __syncthreads();
  float* prev = cost_a;
  float* next = cost_b;
  for (int t = 0; t < kT; ++t) {
    const float wt = weight[t];
    const float linear = -2.0f * wt * target[t];
    uint8_t* step_planes = planes + static_cast<size_t>(S::step_bytes) * t;
    for (int r = tid; r < S::groups; r += kThreads) {
      float best = prev[r];
      uint32_t arg = 0;
#pragma unroll
      for (int j = 1; j < S::fan; ++j) {
        const float c = prev[r + j * S::groups];
        if (c < best) {
          best = c;
          arg = static_cast<uint32_t>(j);
        }
      }
      // 32 consecutive r make one 32-bit word of each plane (bit r & 7 of byte r >> 3, little-endian).
#pragma unroll
      for (int b = 0; b < K; ++b) {
        const uint32_t bits = __ballot_sync(0xffffffffu, (arg >> b) & 1u);
        if (lane == 0) reinterpret_cast<uint32_t*>(step_planes + b * S::plane_bytes)[r >> 5] = bits;
      }
#pragma unroll
      for (int b = 0; b < S::fan; ++b) {
        const int s = (r << K) | b;
        const float c = codes[s];
        next[s] = fmaf(c, fmaf(c, wt, linear), best);
      }
    }
    __syncthreads();
    float* tmp = prev;
    prev = next;
    next = tmp;
  }
  // The best admissible final state, the lowest index on ties.
  float bc = inf;
  uint32_t bi = 0xffffffffu;
  for (int s = tid; s < kStates; s += kThreads) {
    if (overlap >= 0 && (s & S::overlap_mask) != static_cast<uint32_t>(overlap)) continue;
    const float c = prev[s];
    if (bi == 0xffffffffu || c < bc || (c == bc && static_cast<uint32_t>(s) < bi)) {
      bc = c;
      bi = static_cast<uint32_t>(s);
    }
  }
  red_cost[tid] = bc;
  red_idx[tid] = bi;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (tid < half) {
      const float c = red_cost[tid + half];
      const uint32_t i = red_idx[tid + half];
      if (i != 0xffffffffu &&
          (red_idx[tid] == 0xffffffffu || c < red_cost[tid] || (c == red_cost[tid] && i < red_idx[tid]))) {
        red_cost[tid] = c;
        red_idx[tid] = i;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    uint32_t state = red_idx[0];
    for (int t = kT - 1; t >= 0; --t) {
      states[t] = state;
      const uint32_t group = state >> K;
      const uint8_t* p = planes + static_cast<size_t>(S::step_bytes) * t;
      uint32_t j = 0;
      for (int b = 0; b < K; ++b) j |= ((p[b * S::plane_bytes + (group >> 3)] >> (group & 7)) & 1u) << b;
      state = group | (j << (kL - K));
    }
  }
  __syncthreads();
}

template <int K>
__global__ void __launch_bounds__(kThreads) search_tiles_kernel(const float* codes, int64_t count, const float* target,
                                                                const float* weight, uint16_t* states_out,
                                                                float* cost_scratch, uint8_t* plane_scratch) {
  __shared__ float tt[kT], tw[kT], rt[kT], rw[kT];
  __shared__ uint32_t st[kT];
  __shared__ float red_cost[kThreads];
  __shared__ uint32_t red_idx[kThreads];
  float* cost_a = cost_scratch + static_cast<size_t>(blockIdx.x) * 2 * kStates;
  float* cost_b = cost_a + kStates;
  uint8_t* planes = plane_scratch + static_cast<size_t>(blockIdx.x) * Shape<K>::step_bytes * kT;
  const int tid = threadIdx.x;
  for (int64_t tile = blockIdx.x; tile < count; tile += gridDim.x) {
    constexpr int half = kT / 2;
    for (int i = tid; i < kT; i += kThreads) {
      tt[i] = target[tile * kT + i];
      tw[i] = weight[tile * kT + i];
      const int src = ((i - half) % kT + kT) % kT;  // rolled[half] = original[0]
      rt[i] = target[tile * kT + src];
      rw[i] = weight[tile * kT + src];
    }
    __syncthreads();
    run_pass<K>(codes, rt, rw, -1, cost_a, cost_b, planes, st, red_cost, red_idx);
    const int overlap = static_cast<int>(st[half] >> K);
    __syncthreads();
    run_pass<K>(codes, tt, tw, overlap, cost_a, cost_b, planes, st, red_cost, red_idx);
    for (int i = tid; i < kT; i += kThreads) states_out[tile * kT + i] = static_cast<uint16_t>(st[i]);
    __syncthreads();
  }
}

// The code tables on the GPU, uploaded once per table (they are static arrays).
const float* device_codes(const float* host) {
  static std::mutex mu;
  static std::unordered_map<int, std::unordered_map<const float*, float*>> by_device;
  int dev = 0;
  check(cudaGetDevice(&dev), "device");
  std::lock_guard<std::mutex> lock(mu);
  float*& d = by_device[dev][host];
  if (d == nullptr) {
    check(cudaMalloc(reinterpret_cast<void**>(&d), kStates * sizeof(float)), "allocate code table");
    check(cudaMemcpy(d, host, kStates * sizeof(float), cudaMemcpyHostToDevice), "copy code table");
  }
  return d;
}

template <int K>
void launch(const float* codes, int64_t count, const float* target, const float* weight, uint16_t* states) {
  int dev = 0, sms = 0;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "device attribute");
  // Blocks resident at once; each keeps 512 KB of state costs (and its
  // survivor planes) in device memory, so fewer blocks stay in L2.
  // EQ_CUDA_TRELLIS_BLOCKS overrides the default (bench/quant_device).
  const char* env = std::getenv("EQ_CUDA_TRELLIS_BLOCKS");
  const int64_t configured = env ? std::atoll(env) : 0;
  const int64_t blocks = std::min<int64_t>(count, configured > 0 ? configured : static_cast<int64_t>(sms) * 4);
  DeviceBuffer<float> dt(target, static_cast<size_t>(count * kT)), dw(weight, static_cast<size_t>(count * kT));
  DeviceBuffer<uint16_t> ds(static_cast<size_t>(count * kT));
  DeviceBuffer<float> cost(static_cast<size_t>(blocks) * 2 * kStates);
  DeviceBuffer<uint8_t> planes(static_cast<size_t>(blocks) * Shape<K>::step_bytes * kT);
  search_tiles_kernel<K><<<static_cast<unsigned>(blocks), kThreads, 0, cudaStreamPerThread>>>(
      device_codes(codes), count, dt.get(), dw.get(), ds.get(), cost.get(), planes.get());
  check_launch("trellis Viterbi kernel");
  ds.download(states);
}

}  // namespace

void search_tiles(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                  uint16_t* states) {
  if (count <= 0) return;
  require_gpu();
  switch (bits) {
    case 2: return launch<2>(codes, count, target, weight, states);
    case 3: return launch<3>(codes, count, target, weight, states);
    case 4: return launch<4>(codes, count, target, weight, states);
  }
  EQ_CHECK(false, "trellis bits " + std::to_string(bits) + " on the GPU");
}

QuantizedMatrix quantize_trellis(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                 const QuantizeOptions& options) {
  require_gpu();
  return trellis::quantize_matrix(w, rows, cols, options, format.weight_bits,
                                  trellis::initial_scale_ratio(format.weight_bits), trellis::code_of(format),
                                  search_tiles);
}

}  // namespace eq::quant::cuda

// The trellis tile search on the GPU: Viterbi::run_tail_biting (L = 16,
// K = 2, 3, 4) for many 16x16 tiles at once (a persistent grid). The step is
// viterbi_step_generic's: the same strict-less argmin over predecessors
// (lowest j on ties), the same fmaf(code, fmaf(code, weight, linear), best),
// the lowest admissible final state on ties; so the states equal the CPU's
// bit for bit. The rest of the trellis quantizer (rotations, row scales,
// importance feedback, refit, packing) is quantize_matrix's own, fed by this
// search.
//
// Two kernels. The cluster kernel (the default) keeps a tile's 2^16 state
// costs on chip: a cluster of two thread blocks holds 128 KB each in shared
// memory, reached across the pair through distributed shared memory, and each
// step updates them in place (below). It computes the code values from the
// state instead of reading the 256 KB table. The global-memory kernel keeps
// the costs (two 256 KB buffers per block) in device memory and reads the
// table; it serves any code table and is the baseline of bench/quant_device
// (EQ_CUDA_TRELLIS_KERNEL=global).
//
// In place: the predecessors of states (r << K) | b, b < 2^K, are the states
// (j << (L - K)) | r, j < 2^K: a butterfly of 2^K inputs and 2^K outputs. At
// step t the cost of state s is kept at address rotr16(s, t·K mod 16); then
// output b of a butterfly lands at the address input j = b was read from, so
// every butterfly writes only what it read, and after the 256 steps of a tile
// (256·K ≡ 0 mod 16) address and state agree again.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <unordered_map>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/gpus.h"
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

// The "better" rule of the final-state choice: a state i (0xffffffff: none)
// beats the best so far with a lower cost, or the same cost and a lower index.
__device__ inline bool better(float c, uint32_t i, float bc, uint32_t bi) {
  return i != 0xffffffffu && (bi == 0xffffffffu || c < bc || (c == bc && i < bi));
}

// The best admissible state among cost[0, n) (state base | i; overlap < 0:
// all admissible), the lowest index on ties, reduced over the block's kTh
// threads into red_cost[0], red_idx[0].
template <int kTh, typename Cost>
__device__ void block_best(const Cost& cost, int n, uint32_t base, uint32_t overlap_mask, int overlap,
                           float* red_cost, uint32_t* red_idx) {
  const int tid = threadIdx.x;
  float bc = __int_as_float(0x7f800000);
  uint32_t bi = 0xffffffffu;
  for (int i = tid; i < n; i += kTh) {
    const uint32_t s = base | static_cast<uint32_t>(i);
    if (overlap >= 0 && (s & overlap_mask) != static_cast<uint32_t>(overlap)) continue;
    const float c = cost(i);
    if (better(c, s, bc, bi)) {
      bc = c;
      bi = s;
    }
  }
  red_cost[tid] = bc;
  red_idx[tid] = bi;
  __syncthreads();
  for (int half = kTh / 2; half > 0; half /= 2) {
    if (tid < half && better(red_cost[tid + half], red_idx[tid + half], red_cost[tid], red_idx[tid])) {
      red_cost[tid] = red_cost[tid + half];
      red_idx[tid] = red_idx[tid + half];
    }
    __syncthreads();
  }
}

// Tile `tile`'s targets and weights (tt, tw) and the same rolled by half a
// tile for the free pass (rt, rw: rolled[half] = original[0]).
template <int kTh>
__device__ void load_tile(const float* target, const float* weight, int64_t tile, float* tt, float* tw, float* rt,
                          float* rw) {
  constexpr int half = kT / 2;
  for (int i = threadIdx.x; i < kT; i += kTh) {
    tt[i] = target[tile * kT + i];
    tw[i] = weight[tile * kT + i];
    const int src = ((i - half) % kT + kT) % kT;
    rt[i] = target[tile * kT + src];
    rw[i] = weight[tile * kT + src];
  }
}

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
  block_best<kThreads>([&](int i) { return prev[i]; }, kStates, 0, S::overlap_mask, overlap, red_cost, red_idx);
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
    load_tile<kThreads>(target, weight, tile, tt, tw, rt, rw);
    __syncthreads();
    run_pass<K>(codes, rt, rw, -1, cost_a, cost_b, planes, st, red_cost, red_idx);
    const int overlap = static_cast<int>(st[half] >> K);
    __syncthreads();
    run_pass<K>(codes, tt, tw, overlap, cost_a, cost_b, planes, st, red_cost, red_idx);
    for (int i = tid; i < kT; i += kThreads) states_out[tile * kT + i] = static_cast<uint16_t>(st[i]);
    __syncthreads();
  }
}

// ---- the cluster kernel ----

namespace cg = cooperative_groups;

constexpr int kCluster = 2;                       // thread blocks sharing a tile's costs
constexpr int kBlockStates = kStates / kCluster;  // costs per block (128 KB)
constexpr int kClusterThreads = 512;

__host__ __device__ constexpr uint32_t rotr16(uint32_t x, int r) { return ((x >> r) | (x << ((16 - r) & 15))) & 0xffffu; }
__host__ __device__ constexpr uint32_t rotl16(uint32_t x, int r) { return ((x << r) | (x >> ((16 - r) & 15))) & 0xffffu; }

// The address bits of a butterfly at step t (R = t·K mod 16): its K input
// bits j occupy positions [b, b + K) mod 16, b = (16 - K - R) mod 16; the
// other 16 - K (free) positions, in increasing order, take the bits of a
// butterfly index x. The highest free position then holds x's top bit, the
// block that owns the butterfly: at a step where address bit 15 is free, all
// of a butterfly's inputs live in its own block.
template <int K>
struct StepLayout {
  int R, b;
  __device__ explicit StepLayout(int t) : R((t * K) & 15), b((32 - K - ((t * K) & 15)) & 15) {}
  __device__ bool wraps() const { return b + K > 16; }
  // Address bit 15 is one of the input bits: inputs are spread over both blocks.
  __device__ bool crosses() const { return b + K == 16 || wraps(); }
  __device__ uint32_t deposit(uint32_t x) const {
    if (wraps()) return x << (b + K - 16);
    return (x & ((1u << b) - 1u)) | ((x >> b) << (b + K));
  }
  __device__ uint32_t extract(uint32_t a) const {
    if (wraps()) return a >> (b + K - 16);
    return (a & ((1u << b) - 1u)) | ((a >> (b + K)) << b);
  }
};

// The code values y(s) as floats, without a conversion instruction (a
// quarter-rate one): the bits of 2^23 + n (or 2^23 + 2^22 + n) are those of a
// float whose value is exactly that, and subtracting the constant back is
// exact, so the value equals static_cast<float>(y) for the |y| < 2^22 of
// both codes.

// 1MAD's value from the hash x = s·mul + add: the sum of x's four bytes
// (code_1mad's pairwise sums), one dp4a added to 2^23's bits.
__device__ inline float one_mad_value(uint32_t x) {
  return __uint_as_float(__dp4a(x, 0x01010101u, 0x4B000000u)) - (8388608.0f + 510.0f);
}

// The LUT code's value of state s (code_lut).
__device__ inline float lut_value(uint32_t s, const int8_t* lut_a, const int8_t* lut_b) {
  const uint32_t a = (s ^ (s >> 10)) & 63u;
  const uint32_t b = (static_cast<uint8_t>(lut_a[a]) ^ (s >> 6)) & 63u;
  return __int_as_float(0x4B400000 + lut_a[a] + lut_b[b]) - 12582912.0f;
}

// The LUT code's two tables, passed by value (128 bytes of kernel parameters).
struct LutTables {
  int8_t a[trellis::kLutEntries], b[trellis::kLutEntries];
};

// The 2^K inputs of the butterfly whose input 0 sits at address a0, from this
// block's costs or (CROSS, address bit 15 naming the other block) the other's;
// their addresses out too (the outputs go back there).
template <int K, bool CROSS, typename T>
__device__ __forceinline__ void butterfly_inputs(uint32_t a0, const uint32_t* input_bits, uint32_t rank, const T* cost,
                                        const T* remote, T* in, uint32_t* addr) {
#pragma unroll
  for (int j = 0; j < Shape<K>::fan; ++j) {
    addr[j] = a0 | input_bits[j];
    const uint32_t off = addr[j] & (kBlockStates - 1);
    in[j] = (!CROSS || (addr[j] >> 15) == rank) ? cost[off] : remote[off];
  }
}

// The traceback of the cluster kernels: from the final state, each step's
// survivor bits (planes, in the step's address layout) give the predecessor;
// states[t] out.
template <int K>
__device__ inline void trace_back(uint32_t state, const uint8_t* planes, uint32_t* states) {
  using S = Shape<K>;
  for (int t = kT - 1; t >= 0; --t) {
    states[t] = state;
    const uint32_t group = state >> K;
    const StepLayout<K> lay(t);
    const uint32_t x = lay.extract(rotr16(group, lay.R));
    const uint8_t* p = planes + static_cast<size_t>(S::step_bytes) * t;
    uint32_t j = 0;
    for (int bit = 0; bit < K; ++bit) j |= ((p[bit * S::plane_bytes + (x >> 3)] >> (x & 7)) & 1u) << bit;
    state = group | (j << (kL - K));
  }
}

struct ClusterShared {
  float tt[kT], tw[kT], rt[kT], rw[kT];
  uint32_t st[kT];
  float red_cost[kClusterThreads];
  uint32_t red_idx[kClusterThreads];
  float best_cost;
  uint32_t best_idx;
  int8_t lut_a[trellis::kLutEntries], lut_b[trellis::kLutEntries];
};

// One step of this block's butterflies (lay: the step's address layout;
// CROSS: some inputs live in the other block).
template <int K, trellis::Code CODE, bool CROSS>
__device__ inline void step_butterflies(const StepLayout<K>& lay, uint32_t rank, float wt, float linear,
                                        uint8_t* step_planes, float* cost, float* remote, const ClusterShared& sh) {
  using S = Shape<K>;
  constexpr int kHalfGroups = S::groups / kCluster;
  const int tid = threadIdx.x, lane = tid & 31;
  uint32_t input_bits[S::fan];  // address bits of input j, the same for every butterfly of the step
#pragma unroll
  for (int j = 0; j < S::fan; ++j) input_bits[j] = rotr16(static_cast<uint32_t>(j) << (kL - K), lay.R);
  // deposit and the rotation are bit permutations: the thread's part of a
  // butterfly index (rank, tid) and the iteration's (k) have disjoint bits,
  // so each is moved once and the two are or-ed (the iteration's part is the
  // same in every thread).
  static_assert(kClusterThreads == 512 && kHalfGroups % kClusterThreads == 0, "k takes the bits above tid's 9");
  const uint32_t x_thread = (rank << (kL - K - 1)) | static_cast<uint32_t>(tid);
  const uint32_t a0_thread = lay.deposit(x_thread);
  const uint32_t r_thread = rotl16(a0_thread, lay.R);
#pragma unroll
  for (int k = 0; k < kHalfGroups / kClusterThreads; ++k) {
    const uint32_t x_iter = static_cast<uint32_t>(k) << 9, a0_iter = lay.deposit(x_iter);
    const uint32_t x = x_thread | x_iter;  // the plane slot of this butterfly
    const uint32_t a0 = a0_thread | a0_iter;
    const uint32_t r = r_thread | rotl16(a0_iter, lay.R);
    float in[S::fan];
    uint32_t addr[S::fan];
    butterfly_inputs<K, CROSS>(a0, input_bits, rank, cost, remote, in, addr);
    float best = in[0];
    uint32_t arg = 0;
#pragma unroll
    for (int j = 1; j < S::fan; ++j)
      if (in[j] < best) {
        best = in[j];
        arg = static_cast<uint32_t>(j);
      }
#pragma unroll
    for (int bit = 0; bit < K; ++bit) {
      const uint32_t word = __ballot_sync(0xffffffffu, (arg >> bit) & 1u);
      if (lane == 0) reinterpret_cast<uint32_t*>(step_planes + bit * S::plane_bytes)[x >> 5] = word;
    }
    // Output j (state (r << K) | j) goes where input j was read.
    const uint32_t out0 = r << K;
    // 1MAD's hash of output j, (out0 + j)·mul + add, as one multiply-add for the butterfly and an add per j.
    const uint32_t hash0 = out0 * trellis::k1madMul + trellis::k1madAdd;
#pragma unroll
    for (int j = 0; j < S::fan; ++j) {
      float c;
      if constexpr (CODE == trellis::Code::k1mad)
        c = one_mad_value(hash0 + static_cast<uint32_t>(j) * trellis::k1madMul);
      else
        c = lut_value(out0 | static_cast<uint32_t>(j), sh.lut_a, sh.lut_b);
      const float v = fmaf(c, fmaf(c, wt, linear), best);
      const uint32_t off = addr[j] & (kBlockStates - 1);
      if (!CROSS || (addr[j] >> 15) == rank) cost[off] = v;
      else remote[off] = v;
    }
  }
}

// One Viterbi pass over kT steps by both blocks of the cluster; sh.st gets
// the states (in both blocks). overlap < 0: free start.
template <int K, trellis::Code CODE>
__device__ void run_pass_cluster(cg::cluster_group& cluster, ClusterShared& sh, float* cost, float* remote,
                                 const float* target, const float* weight, int overlap, uint8_t* planes) {
  using S = Shape<K>;
  const int tid = threadIdx.x;
  const uint32_t rank = cluster.block_rank();
  const float inf = __int_as_float(0x7f800000);
  for (int i = tid; i < kBlockStates; i += kClusterThreads) {
    const uint32_t s = (rank << 15) | static_cast<uint32_t>(i);  // step 0: address = state
    cost[i] = (overlap < 0 || (s & S::overlap_mask) == static_cast<uint32_t>(overlap)) ? 0.0f : inf;
  }
  cluster.sync();
  for (int t = 0; t < kT; ++t) {
    const StepLayout<K> lay(t);
    const bool cross = lay.crosses();
    const float wt = weight[t];
    const float linear = -2.0f * wt * target[t];
    uint8_t* step_planes = planes + static_cast<size_t>(S::step_bytes) * t;
    if (cross) step_butterflies<K, CODE, true>(lay, rank, wt, linear, step_planes, cost, remote, sh);
    else step_butterflies<K, CODE, false>(lay, rank, wt, linear, step_planes, cost, remote, sh);
    // A step that reaches into the other block waits for (and is waited on
    // by) the whole cluster; two steps within blocks only for the block.
    if (cross || t + 1 == kT || StepLayout<K>(t + 1).crosses()) cluster.sync();
    else __syncthreads();
  }
  // The best admissible final state, the lowest index on ties: each block
  // over its half, then the two halves.
  block_best<kClusterThreads>([&](int i) { return cost[i]; }, kBlockStates, rank << 15, S::overlap_mask, overlap, sh.red_cost, sh.red_idx);
  if (tid == 0) {
    sh.best_cost = sh.red_cost[0];
    sh.best_idx = sh.red_idx[0];
  }
  cluster.sync();  // both halves' bests and every plane written
  if (tid == 0) {
    const ClusterShared& other = *cluster.map_shared_rank(&sh, rank ^ 1u);
    // Block 0's candidate first, as one reduction over all states would see them.
    const ClusterShared& b0 = rank == 0 ? sh : other;
    const ClusterShared& b1 = rank == 0 ? other : sh;
    trace_back<K>(better(b1.best_cost, b1.best_idx, b0.best_cost, b0.best_idx) ? b1.best_idx : b0.best_idx, planes,
                  sh.st);
  }
  // The planes are read by both blocks before the next pass writes them.
  cluster.sync();
}

template <int K, trellis::Code CODE>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kClusterThreads)
    search_tiles_cluster_kernel(int64_t count, const float* target, const float* weight, uint16_t* states_out,
                                uint8_t* plane_scratch, LutTables luts) {
  extern __shared__ float cost[];  // kBlockStates
  __shared__ ClusterShared sh;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank();
  float* remote = cluster.map_shared_rank(cost, rank ^ 1u);
  const int64_t cluster_id = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
  uint8_t* planes = plane_scratch + static_cast<size_t>(cluster_id) * Shape<K>::step_bytes * kT;
  const int tid = threadIdx.x;
  if (tid < trellis::kLutEntries) {
    sh.lut_a[tid] = luts.a[tid];
    sh.lut_b[tid] = luts.b[tid];
  }
  for (int64_t tile = cluster_id; tile < count; tile += clusters) {
    constexpr int half = kT / 2;
    load_tile<kClusterThreads>(target, weight, tile, sh.tt, sh.tw, sh.rt, sh.rw);
    __syncthreads();
    run_pass_cluster<K, CODE>(cluster, sh, cost, remote, sh.rt, sh.rw, -1, planes);
    const int overlap = static_cast<int>(sh.st[half] >> K);
    run_pass_cluster<K, CODE>(cluster, sh, cost, remote, sh.tt, sh.tw, overlap, planes);
    if (rank == 0)
      for (int i = tid; i < kT; i += kClusterThreads) states_out[tile * kT + i] = static_cast<uint16_t>(sh.st[i]);
    __syncthreads();
  }
  cluster.sync();  // neither block leaves while the other may read its shared memory
}


// ---- the half-precision search (TrellisSearch::kHalf) ----
//
// The cluster kernel's butterflies and in-place layout, with each state's
// cost in FP16 and two tiles per cluster: a state's slot is a half2 holding
// the costs of tile A (low half) and tile B (high half), so one HMNMX2 /
// HSET2 / HFMA2 serves two tiles and the address work is shared. Three
// changes against the exact search keep FP16 accurate:
//   - the step cost is w·(y − t)² (a square, never a large difference), in
//     code units / 64 with w divided by the tile's largest weight, so it
//     stays well inside FP16's range;
//   - at every cluster-wide step the smallest cost of the step's inputs is
//     reduced (REDUX per warp, a shared-memory atomic per warp) and
//     subtracted at the next step: costs stay relative to the best path, so
//     their precision is spent where the decisions are;
//   - ties (more frequent in FP16) go to the lowest predecessor as before.
// The result is deterministic (the reductions are minima) but not the exact
// search's; its MSE is held within 0.5% of it by tests/cuda.
//
// What makes a state update cheap here:
//   - the steps are unrolled over the period of R = t·K mod 16 (8, 16, 4
//     steps for K = 2, 3, 4), so each step's layout is known at compile time:
//     a thread computes its base address once a step and every input and
//     output address is that base plus an immediate, as are the 1MAD hash
//     offsets, the survivor shifts, the renormalization and the sync kind;
//   - survivors are not balloted: each thread packs its butterflies' K-bit
//     choices (tile A in bits [0, 16), tile B in [16, 32)) into a word with
//     one shift-or a butterfly and stores the word once, coalesced with its
//     warp's (layout at HalfShape);
//   - the free pass's traceback stops at the middle step, the only state it
//     hands on.
constexpr float kHalfScale = 1.0f / 64.0f;  // code units per FP16 unit

// A thread's share of a step and its survivor words. A cluster's survivors
// of one step are words (rank, m, tid), m < words, at ((rank · words + m) ·
// 512 + tid); word m holds butterflies k = m · unroll + u (u < unroll) of
// thread tid, butterfly index x = rank << (15 − K) | k << 9 | tid: tile A's
// choice j in bits [K·u, K·u + K), tile B's in [16 + K·u, ...).
template <int K>
struct HalfShape {
  static constexpr int iters = (kStates >> K) / kCluster / kClusterThreads;  // 16, 8, 4 butterflies a step
  static constexpr int unroll = K == 2 ? 8 : 4;                              // butterflies per word
  static constexpr int words = iters / unroll;
  static constexpr size_t step_words = static_cast<size_t>(kCluster) * words * kClusterThreads;
  static constexpr size_t plane_words = step_words * kT;  // one cluster's scratch
  static constexpr int period = K == 3 ? 16 : 16 / K;     // steps until R = t·K mod 16 repeats
  static_assert(unroll * K <= 16 && iters % unroll == 0, "a word holds unroll choices of both tiles");
};

// StepLayout with R a template argument (the half search's steps are
// unrolled over R's period).
template <int K>
constexpr bool crosses_at(int R) {  // StepLayout::crosses
  return ((32 - K - R) & 15) + K >= 16;
}

template <int K, int R>
struct HalfLayout {
  static constexpr int b = (32 - K - R) & 15;
  static constexpr bool wraps = b + K > 16;
  static constexpr bool crosses = crosses_at<K>(R);
  static constexpr bool after_cross = crosses_at<K>((R + 16 - K) & 15);  // the previous step crossed: renormalize
  static constexpr bool before_cross = crosses_at<K>((R + K) & 15);
  __host__ __device__ static constexpr uint32_t deposit(uint32_t x) {
    if constexpr (wraps) return x << (b + K - 16);
    else return (x & ((1u << b) - 1u)) | ((x >> b) << (b + K));
  }
  // Address bits of input j, the same for every butterfly of the step.
  __host__ __device__ static constexpr uint32_t input(int j) {
    return rotr16(static_cast<uint32_t>(j) << (kL - K), R);
  }
};

struct HalfShared {
  __half2 tt[kT], tw[kT], rt[kT], rw[kT];  // targets and weights of tiles A (low) and B (high)
  uint32_t st[2][kT];
  float red_cost[kClusterThreads];
  uint32_t red_idx[kClusterThreads];
  float best_cost[2];
  uint32_t best_idx[2];
  uint32_t ref[2][2];  // [parity][tile]: the reduced minimum, FP16 bits (costs are >= 0, so bits order as values)
  int8_t lut_a[trellis::kLutEntries], lut_b[trellis::kLutEntries];
};

// (y(s) − t) / 64 for both tiles: y's bits are formed in the low half and
// the HFMA2 reads them in both halves (.H0_H0). The bits 0x6400 + n are the
// half 1024 + n (n < 1024), and (1024 + n − bias) / 64 is representable, so
// the HFMA2 does not round; the HSUB2 rounds once.
template <trellis::Code CODE>
__device__ __forceinline__ __half2 half_diff(uint32_t s, uint32_t hash, __half2 t2, const HalfShared& sh) {
  uint32_t bits;
  float bias;
  if constexpr (CODE == trellis::Code::k1mad) {
    bits = __dp4a(hash, 0x01010101u, 0x6400u);  // 1024 + sum of the bytes; y = sum − 510
    bias = 1024.0f + 510.0f;
  } else {
    const uint32_t a = (s ^ (s >> 10)) & 63u;
    const uint32_t b = (static_cast<uint8_t>(sh.lut_a[a]) ^ (s >> 6)) & 63u;
    bits = static_cast<uint32_t>(0x6400 + 512 + sh.lut_a[a] + sh.lut_b[b]);  // 1536 + y
    bias = 1536.0f;
  }
  __half2 h;
  memcpy(&h, &bits, 4);
  const __half2 y = __hfma2(__low2half2(h), __float2half2_rn(kHalfScale), __float2half2_rn(-bias * kHalfScale));
  return __hsub2(y, t2);
}

// One step of this block's butterflies at R = t·K mod 16. words: this step's
// survivor words. ref2: the last cluster-wide step's minimum (after_cross
// steps; zero at t = 0).
template <int K, trellis::Code CODE, int R>
__device__ __forceinline__ void half_step(uint32_t rank, __half2 t2, __half2 w2, __half2 ref2, __half2* cost,
                                          __half2* remote, uint32_t* words, HalfShared& sh, int parity) {
  using Lay = HalfLayout<K, R>;
  using H = HalfShape<K>;
  constexpr int kFan = 1 << K;
  const uint32_t tid = threadIdx.x, lane = tid & 31;
  // The thread's part of the butterfly index, rank << (15 − K) | tid, moved
  // once; k's part (k << 9) is an immediate. Without a crossing, address bit
  // 15 is the rank's: the block's own costs, dropped from the offset.
  const uint32_t a_full = Lay::deposit((rank << (15 - K)) | tid);
  const uint32_t a_thread = a_full & (kBlockStates - 1);
  const uint32_t r_thread = rotl16(a_full, R);  // state of input 0, (r << K) | j that of output j
  const uint32_t hash_thread = (r_thread << K) * trellis::k1madMul + trellis::k1madAdd;
  __half2* lo = cost + a_thread;  // inputs with address bit 15 clear
  __half2* hi = lo;               // ... and set
  if constexpr (Lay::crosses) {
    lo = (rank == 0 ? cost : remote) + a_thread;
    hi = (rank == 0 ? remote : cost) + a_thread;
  }
  __half2 step_min = __half2half2(__ushort_as_half(0x7c00));  // +inf in both halves
#pragma unroll 1
  for (int m = 0; m < H::words; ++m) {
    const uint32_t a_m = Lay::deposit(static_cast<uint32_t>(m * H::unroll) << 9);
    const uint32_t r_m = rotl16(a_m, R);
    __half2* const lo_m = lo + a_m;
    __half2* const hi_m = hi + a_m;
    const uint32_t hash_m = hash_thread + (r_m << K) * trellis::k1madMul;
    const uint32_t s_m = (r_thread | r_m) << K;
    uint32_t word = 0;
#pragma unroll
    for (int u = 0; u < H::unroll; ++u) {
      const uint32_t a_u = Lay::deposit(static_cast<uint32_t>(u) << 9);
      const uint32_t r_u = rotl16(a_u, R);
      __half2 in[kFan];
#pragma unroll
      for (int j = 0; j < kFan; ++j) {
        const uint32_t off = a_u | (Lay::input(j) & (kBlockStates - 1));
        in[j] = ((Lay::input(j) >> 15) ? hi_m : lo_m)[off];
      }
      __half2 best = in[0];
      uint32_t arg = 0;  // tile A's argmin in bits [0, K), tile B's in [16, 16 + K)
#pragma unroll
      for (int j = 1; j < kFan; ++j) {
        const uint32_t less = __hlt2_mask(in[j], best);  // strict: the lowest j keeps a tie
        best = __hmin2(best, in[j]);
        arg = (arg & ~less) | ((static_cast<uint32_t>(j) * 0x10001u) & less);
      }
      if constexpr (Lay::crosses) step_min = __hmin2(step_min, best);
      if constexpr (Lay::after_cross) best = __hsub2(best, ref2);
      word |= arg << (K * u);
#pragma unroll
      for (int j = 0; j < kFan; ++j) {
        const uint32_t out = (r_u << K) | static_cast<uint32_t>(j);  // output state, less the thread's and m's bits
        const __half2 d = half_diff<CODE>(s_m | out, hash_m + out * trellis::k1madMul, t2, sh);
        const __half2 v = __hfma2(d, __hmul2(d, w2), best);
        const uint32_t off = a_u | (Lay::input(j) & (kBlockStates - 1));
        ((Lay::input(j) >> 15) ? hi_m : lo_m)[off] = v;
      }
    }
    words[(rank * H::words + m) * kClusterThreads + tid] = word;
  }
  if constexpr (Lay::crosses) {
    uint32_t bits;
    memcpy(&bits, &step_min, 4);
    const uint32_t lo_min = __reduce_min_sync(0xffffffffu, bits & 0xffffu);
    const uint32_t hi_min = __reduce_min_sync(0xffffffffu, bits >> 16);
    if (lane == 0) {
      atomicMin(&sh.ref[parity][0], lo_min);
      atomicMin(&sh.ref[parity][1], hi_min);
    }
  }
}

// Step t (R = t·K mod 16 known): renormalization, the butterflies, the sync.
template <int K, trellis::Code CODE, int R>
__device__ __forceinline__ void half_pass_step(cg::cluster_group& cluster, int t, uint32_t rank, HalfShared& sh,
                                               const HalfShared& other, __half2* cost, __half2* remote,
                                               const __half2* target, const __half2* weight, uint32_t* planes,
                                               int& parity) {
  using Lay = HalfLayout<K, R>;
  __half2 ref2 = __float2half2_rn(0.0f);
  if constexpr (Lay::after_cross) {
    if (t > 0) {
      // Both blocks' minima of the last cluster-wide step: the same reference in each.
      const int p = parity ^ 1;
      const uint32_t lo = min(sh.ref[p][0], other.ref[p][0]), hi = min(sh.ref[p][1], other.ref[p][1]);
      ref2 = __halves2half2(__ushort_as_half(static_cast<unsigned short>(lo)),
                            __ushort_as_half(static_cast<unsigned short>(hi)));
      // The slot the next cluster-wide step fills: read last before this one's sync.
      if (threadIdx.x < 2) sh.ref[parity][threadIdx.x] = 0x7c00u;
    }
  }
  half_step<K, CODE, R>(rank, target[t], weight[t], ref2, cost, remote, planes + HalfShape<K>::step_words * t, sh,
                        parity);
  if constexpr (Lay::crosses) parity ^= 1;
  // A step that reaches into the other block waits for (and is waited on by)
  // the whole cluster; two steps within blocks only for the block.
  if constexpr (Lay::crosses || Lay::before_cross) cluster.sync();
  else __syncthreads();
}

// The half search's traceback from `state` down to step `stop` (states[t],
// t >= stop, out); tile 0 or 1 of the survivor words.
template <int K>
__device__ void half_trace_back(uint32_t state, const uint32_t* planes, int tile, int stop, uint32_t* states) {
  using H = HalfShape<K>;
  for (int t = kT - 1; t >= stop; --t) {
    states[t] = state;
    const uint32_t group = state >> K;
    const StepLayout<K> lay(t);
    const uint32_t x = lay.extract(rotr16(group, lay.R));
    const uint32_t block = x >> (15 - K), k = (x >> 9) & (H::iters - 1), thread = x & (kClusterThreads - 1);
    const uint32_t word = planes[H::step_words * t + (block * H::words + k / H::unroll) * kClusterThreads + thread];
    const uint32_t j = (word >> (16 * tile + K * (k % H::unroll))) & ((1u << K) - 1u);
    state = group | (j << (kL - K));
  }
}

// One pass over kT steps for tiles A and B; sh.st[0], sh.st[1] get their
// states from step `stop` on (the free pass needs only the middle one).
// overlap < 0: free start.
template <int K, trellis::Code CODE>
__device__ void run_pass_half(cg::cluster_group& cluster, HalfShared& sh, HalfShared& other, __half2* cost,
                              __half2* remote, const __half2* target, const __half2* weight, int overlap_a,
                              int overlap_b, uint32_t* planes, int stop) {
  using S = Shape<K>;
  using H = HalfShape<K>;
  const int tid = threadIdx.x;
  const uint32_t rank = cluster.block_rank();
  const __half inf = __ushort_as_half(0x7c00);
  const __half zero = __ushort_as_half(0);
  for (int i = tid; i < kBlockStates; i += kClusterThreads) {
    const uint32_t s = (rank << 15) | static_cast<uint32_t>(i);
    const bool ok_a = overlap_a < 0 || (s & S::overlap_mask) == static_cast<uint32_t>(overlap_a);
    const bool ok_b = overlap_b < 0 || (s & S::overlap_mask) == static_cast<uint32_t>(overlap_b);
    cost[i] = __halves2half2(ok_a ? zero : inf, ok_b ? zero : inf);
  }
  if (tid < 4) sh.ref[tid >> 1][tid & 1] = 0x7c00u;
  cluster.sync();
  int parity = 0;
  static_assert(kT % H::period == 0, "the pass is whole periods");
  for (int t0 = 0; t0 < kT; t0 += H::period) {
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (half_pass_step<K, CODE, (I * K) & 15>(cluster, t0 + I, rank, sh, other, cost, remote, target, weight,
                                              planes, parity),
       ...);
    }(std::make_integer_sequence<int, H::period>{});
  }
  for (int tile = 0; tile < 2; ++tile) {
    block_best<kClusterThreads>(
        [&](int i) { return __half2float(tile == 0 ? __low2half(cost[i]) : __high2half(cost[i])); }, kBlockStates,
        rank << 15, S::overlap_mask, tile == 0 ? overlap_a : overlap_b, sh.red_cost, sh.red_idx);
    if (tid == 0) {
      sh.best_cost[tile] = sh.red_cost[0];
      sh.best_idx[tile] = sh.red_idx[0];
    }
    __syncthreads();
  }
  cluster.sync();
  if (tid == 0 || tid == 32) {  // tile A's traceback, and tile B's in another warp
    const int tile = tid == 0 ? 0 : 1;
    const HalfShared& b0 = rank == 0 ? sh : other;
    const HalfShared& b1 = rank == 0 ? other : sh;
    half_trace_back<K>(better(b1.best_cost[tile], b1.best_idx[tile], b0.best_cost[tile], b0.best_idx[tile])
                           ? b1.best_idx[tile]
                           : b0.best_idx[tile],
                       planes, tile, stop, sh.st[tile]);
  }
  cluster.sync();
}

// Tiles a and b (b = a when the count is odd) into sh as half2 pairs, in
// code units / 64, the weights divided by each tile's largest.
__device__ void load_tile_pair(const float* target, const float* weight, int64_t a, int64_t b, HalfShared& sh) {
  constexpr int half = kT / 2;
  __shared__ float max_w[2];
  if (threadIdx.x < 2) max_w[threadIdx.x] = 0.0f;
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * kT; i += kClusterThreads) {
    const float w = weight[(i < kT ? a : b) * kT + (i % kT)];
    atomicMax(reinterpret_cast<int*>(&max_w[i / kT]), __float_as_int(w));  // w >= 0: int order is float order
  }
  __syncthreads();
  const float inv_a = max_w[0] > 0.0f ? 1.0f / max_w[0] : 0.0f;
  const float inv_b = max_w[1] > 0.0f ? 1.0f / max_w[1] : 0.0f;
  for (int i = threadIdx.x; i < kT; i += kClusterThreads) {
    const int src = ((i - half) % kT + kT) % kT;
    sh.tt[i] = __floats2half2_rn(target[a * kT + i] * kHalfScale, target[b * kT + i] * kHalfScale);
    sh.tw[i] = __floats2half2_rn(weight[a * kT + i] * inv_a, weight[b * kT + i] * inv_b);
    sh.rt[i] = __floats2half2_rn(target[a * kT + src] * kHalfScale, target[b * kT + src] * kHalfScale);
    sh.rw[i] = __floats2half2_rn(weight[a * kT + src] * inv_a, weight[b * kT + src] * inv_b);
  }
  __syncthreads();
}

// One block an SM (its shared memory): the 1 lets ptxas take up to 128
// registers, where it otherwise stops at 64 and spills.
template <int K, trellis::Code CODE>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kClusterThreads, 1)
    search_tiles_half_kernel(int64_t count, const float* target, const float* weight, uint16_t* states_out,
                             uint8_t* plane_scratch, LutTables luts) {
  extern __shared__ __half2 half_cost[];  // kBlockStates
  __shared__ HalfShared sh;
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank();
  __half2* remote = cluster.map_shared_rank(half_cost, rank ^ 1u);
  HalfShared& other = *cluster.map_shared_rank(&sh, rank ^ 1u);
  const int64_t cluster_id = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
  uint32_t* planes = reinterpret_cast<uint32_t*>(plane_scratch) + static_cast<size_t>(cluster_id) * HalfShape<K>::plane_words;
  const int tid = threadIdx.x;
  if (tid < trellis::kLutEntries) {
    sh.lut_a[tid] = luts.a[tid];
    sh.lut_b[tid] = luts.b[tid];
  }
  const int64_t pairs = (count + 1) / 2;
  for (int64_t pair = cluster_id; pair < pairs; pair += clusters) {
    constexpr int half = kT / 2;
    const int64_t a = 2 * pair, b = std::min(a + 1, count - 1);
    load_tile_pair(target, weight, a, b, sh);
    run_pass_half<K, CODE>(cluster, sh, other, half_cost, remote, sh.rt, sh.rw, -1, -1, planes, half);
    const int overlap_a = static_cast<int>(sh.st[0][half] >> K), overlap_b = static_cast<int>(sh.st[1][half] >> K);
    run_pass_half<K, CODE>(cluster, sh, other, half_cost, remote, sh.tt, sh.tw, overlap_a, overlap_b, planes, 0);
    if (rank == 0)
      for (int i = tid; i < 2 * kT; i += kClusterThreads) {
        const int tile = i / kT;
        if (tile == 0 || b != a) states_out[(tile == 0 ? a : b) * kT + (i % kT)] = static_cast<uint16_t>(sh.st[tile][i % kT]);
      }
    __syncthreads();
  }
  cluster.sync();
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
void launch_global(const float* codes, int64_t count, const float* target, const float* weight, uint16_t* states) {
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

template <int K, trellis::Code CODE, bool HALF>
void launch_cluster(int64_t count, const float* target, const float* weight, uint16_t* states) {
  int dev = 0, sms = 0;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "device attribute");
  constexpr size_t kDynamic = kBlockStates * (HALF ? sizeof(__half2) : sizeof(float));
  const auto kernel = HALF ? search_tiles_half_kernel<K, CODE> : search_tiles_cluster_kernel<K, CODE>;
  // Once per GPU and template instance: the attribute belongs to the device's context.
  static std::mutex attribute_mu;
  static std::unordered_map<int, bool> attribute_set;
  {
    std::lock_guard<std::mutex> lock(attribute_mu);
    if (!attribute_set[dev]) {
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kDynamic)),
            "trellis cluster kernel shared memory");
      attribute_set[dev] = true;
    }
  }
  // One cluster (two blocks, one an SM) per pair of SMs.
  // The half search takes two tiles per cluster.
  const int64_t units = HALF ? (count + 1) / 2 : count;
  const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(units, sms / kCluster));
  DeviceBuffer<float> dt(target, static_cast<size_t>(count * kT)), dw(weight, static_cast<size_t>(count * kT));
  DeviceBuffer<uint16_t> ds(static_cast<size_t>(count * kT));
  // The survivors: the exact search's bit planes, the half search's words (HalfShape).
  DeviceBuffer<uint8_t> planes(static_cast<size_t>(clusters) *
                               (HALF ? HalfShape<K>::plane_words * sizeof(uint32_t) : Shape<K>::step_bytes * kT));
  LutTables luts;
  std::memcpy(luts.a, trellis::kLutA, sizeof luts.a);
  std::memcpy(luts.b, trellis::kLutB, sizeof luts.b);
  kernel<<<static_cast<unsigned>(clusters * kCluster), kClusterThreads, kDynamic, cudaStreamPerThread>>>(
      count, dt.get(), dw.get(), ds.get(), planes.get(), luts);
  check_launch("trellis Viterbi cluster kernel");
  ds.download(states);
}

template <int K, bool HALF>
void launch(const float* codes, int64_t count, const float* target, const float* weight, uint16_t* states) {
  const char* env = std::getenv("EQ_CUDA_TRELLIS_KERNEL");
  const bool global = !HALF && env && std::string(env) == "global";
  if (!global && codes == trellis::code_table(trellis::Code::k1mad))
    return launch_cluster<K, trellis::Code::k1mad, HALF>(count, target, weight, states);
  if (!global && codes == trellis::code_table(trellis::Code::kLut))
    return launch_cluster<K, trellis::Code::kLut, HALF>(count, target, weight, states);
  EQ_CHECK(!HALF, "the half-precision trellis search knows only the 1MAD and LUT codes");
  launch_global<K>(codes, count, target, weight, states);
}

template <bool HALF>
void search(int bits, const float* codes, int64_t count, const float* target, const float* weight,
            uint16_t* states) {
  if (count <= 0) return;
  require_gpu();
  switch (bits) {
    case 2: return launch<2, HALF>(codes, count, target, weight, states);
    case 3: return launch<3, HALF>(codes, count, target, weight, states);
    case 4: return launch<4, HALF>(codes, count, target, weight, states);
  }
  EQ_CHECK(false, "trellis bits " + std::to_string(bits) + " on the GPU");
}

}  // namespace

void search_tiles(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                  uint16_t* states) {
  search<false>(bits, codes, count, target, weight, states);
}

void search_tiles_half(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                       uint16_t* states) {
  search<true>(bits, codes, count, target, weight, states);
}

QuantizedMatrix quantize_trellis(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                 const QuantizeOptions& options) {
  require_gpu();
  return trellis::quantize_matrix(w, rows, cols, options, format.weight_bits,
                                  trellis::initial_scale_ratio(format.weight_bits), trellis::code_of(format),
                                  trellis_search() == TrellisSearch::kHalf ? search_tiles_half : search_tiles);
}

}  // namespace eq::quant::cuda

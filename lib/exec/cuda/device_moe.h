// A MoE layer's routed experts on the GPU and the dispatch strategies of
// exec/dispatch.h run there (issue #41's second slice): every strategy
// computes slot_out[s] = expert(expert_ids[s])(x[s / top_k]) for every pair
// s = token * top_k + j, unweighted, as MoeWork does on the CPU.
//
//   mask-combine  for every bit group, every pair through that group's
//                 experts (ids outside it remapped to its first member), the
//                 result times the 0/1 membership mask added to slot_out.
//   sorted        pairs counting-sorted by expert on the host, their token
//                 rows gathered on the GPU, each expert's rows as one batch,
//                 the batches of one format and row count in one grouped
//                 launch per projection, rows scattered back.
//   auto          M = tokens <= sort_cutoff: each pair straight from its token
//                 row into its slot (no sort, no gather: one grouped launch of
//                 one-row jobs per format and projection); larger M sorted.
//
// When every expert batch of a call is a decode batch, each bit group's
// batches run on a lane of their own (LaneStreams), so the groups' launches
// overlap on the GPU instead of queuing one behind the other; with a plain
// SwiGLU, down forms the activation from g and u as it stages its input
// (gated_down), one launch fewer a group. With one row a batch and few
// batches (a token's pairs on a layer of small experts), the groups whose
// formats share launches (quant::cuda::run_gemv_calls) run as one launch a
// projection instead, as a uniform layer does.
//
// An expert batch of at most quant::kMaxDeviceGemvRows rows runs through the
// format's decode product (FormatTraits::device_gemv, float32), a larger one
// through its prefill product (device_gemm: bf16 on the tensor cores). So a
// pair's result depends on how many rows its expert got in the call (the
// strategies agree within the prefill's bf16 tolerance, not bit for bit),
// as on any GPU engine that picks kernels by batch size.
//
// The expert ids come from the host (the router's output); pruned experts
// are never routed (an id of one throws).
//
// Routed decode (run_moe_routed) is auto's per-pair path with the expert
// ids in device memory (device_routing.h's output), so that nothing waits
// for the host: with blocks for every pair, a block reads its pair's expert
// id and returns at once when that expert is in another group
// (quant::RoutedPairs). The groups whose formats run in launches of several
// formats (the stream rows and int8_row), when there are two or more, share
// one launch a projection step (quant::cuda::run_routed_calls), down forming
// SwiGLU as it stages its input, as a uniform layer's two launches; every
// other group's products run through DeviceGemv::run_routed on a lane of
// their own. Each pair's result has the bits the per-pair path gives it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/bit_group.h"
#include "exec/cuda/device_exec.h"
#include "exec/dispatch.h"
#include "quant/cuda/cuda_gemm.h"

namespace eq::exec::cuda {

// An expert's float32 biases on the GPU (gpt-oss), each empty when absent.
struct DeviceExpertBiases {
  DeviceBuffer gate, up, down;
};

struct DeviceMoeLayer {
  int64_t num_experts = 0, hidden = 0, inter = 0;
  model::Activation act{};              // the layer's (every expert's) activation
  bool biased = false;                  // some expert has biases
  std::vector<DeviceExpert> experts;    // the uploaded (not pruned) experts
  std::vector<DeviceExpertBiases> biases;  // per uploaded expert
  std::vector<int32_t> index_of;        // expert id -> index into experts, -1: pruned
  std::vector<int32_t> group_of;        // expert id -> bit group (position in `groups`), -1: pruned
  std::vector<std::vector<int32_t>> groups;  // expert ids of each non-empty bit group
  size_t nbytes = 0;                    // packed bytes on the GPU
  int64_t mixed_wave = 0;               // quant::cuda::mixed_gemv_wave() on the layer's GPU
  std::vector<int64_t> mixed_blocks;    // per uploaded expert: its gate and up blocks in a launch of
                                        // several formats, -1 when it takes no part
  // Routed decode: every expert's formats have routed products, gate and up
  // share a format within each bit group and down one, and the activation is
  // a plain SwiGLU without biases.
  struct RoutedGroup {
    const quant::FormatTraits *up = nullptr, *down = nullptr;
    bool gated = false;   // down forms SwiGLU from g and u itself (DeviceGemvJob::x_up)
    bool shared = false;  // in the launches of several formats (quant::cuda::run_routed_calls)
  };
  bool routed = false;
  std::vector<RoutedGroup> routed_groups;  // by position in `groups`
  // By group, the formats of the shared launches (null: the group's own
  // launches); empty when fewer than two groups share. A call shares them
  // when its pairs' gate and up blocks, at routed_shared_blocks a pair (the
  // most of any shared group's expert), fit one wave of the shared kernel
  // (mixed_wave), as the per-pair path's rule; else every group takes a lane.
  std::vector<const quant::FormatTraits*> routed_shared_up, routed_shared_down;
  int64_t routed_shared_blocks = 0;
  DeviceBuffer routed_group_of;            // int32 [num_experts]: group_of on the GPU
  DeviceBuffer routed_parts;               // DeviceGemvJob [num_experts][3]: gate, up, down parts (pruned: none)
};


// Copies every expert of `layer` that was not pruned to the GPU, with its
// biases. Throws eq::Error (unsupported) for a format without GPU products,
// or experts of one layer with different activations.
DeviceMoeLayer upload(const PackedLayer& layer);

// Host index arrays and device buffers reused across calls.
struct DeviceMoeScratch {
  DeviceBuffer work;  // gathered rows, g / u / h, rows out, masks, the index arrays
  DeviceBuffer call;  // the products' scratch (DeviceGemv / DeviceGemm::scratch_bytes), a slice per lane
  LaneStreams lanes;  // the bit groups' decode batches run side by side
  std::vector<int64_t> order, offsets;
  std::vector<int32_t> remapped, order32;
  std::vector<float> mask;
};

// slot_out [tokens * top_k, hidden] (device, overwritten) for x [tokens,
// hidden] (device) and expert_ids [tokens * top_k] (host). sort_cutoff is
// used by kAuto only. Enqueued on `stream`; returns once the host's part is
// done (the GPU work may still run: synchronize() before reading slot_out).
void run_moe(const DeviceMoeLayer& layer, DispatchKind kind, int64_t sort_cutoff, const float* x, int64_t tokens,
             int64_t top_k, const int32_t* expert_ids, float* slot_out, DeviceMoeScratch& scratch,
             void* stream = nullptr);

// The most pairs (tokens * top_k) of a routed call: its gate and up launch
// has a row of blocks for each pair's two products (gridDim.y <= 65535).
inline constexpr int64_t kMaxRoutedPairs = 32767;

// run_moe with kAuto at tokens <= sort_cutoff (each pair through its
// expert, one row of x), the ids [tokens * top_k] in device memory: every
// id must name an expert that was not pruned (device_routing.h's do), else
// its pair's slot row is left as it was. layer.routed must hold. Enqueued
// on `stream`; the host reads nothing.
void run_moe_routed(const DeviceMoeLayer& layer, const float* x, int64_t tokens, int64_t top_k,
                    const int32_t* expert_ids, float* slot_out, DeviceMoeScratch& scratch, void* stream = nullptr);

// The prefill product y_j = x_j W_j^T through FormatTraits::device_gemm for
// jobs of one format and shape (any m_rows); `scratch` grows as needed.
void gemm(const quant::FormatTraits& format, int64_t rows, int64_t cols, std::span<const quant::DeviceGemmJob> jobs,
          DeviceBuffer& scratch, void* stream = nullptr);
quant::DeviceGemmJob gemm_job(const DeviceMatrix& m, const float* x, float* y, int64_t m_rows);

// The decode expert MLP: for each expert j (the experts of one layer, any mix
// of formats), out[j] [m_rows, H] = down_j(silu(gate_j x) * up_j x) for
// x [m_rows, H] (device arrays; out holds experts.size() * m_rows * H
// floats): each pair's unweighted output, as the CPU dispatch's slot_out.
// The products group as the MoE layer's do (one grouped launch per format,
// shape and rows of x; gate and up together), and down forms SwiGLU as it
// stages its input where it can (gated_down), else one launch over all
// experts forms it first. `scratch` grows as needed; enqueued, not
// synchronized.
void expert_mlp_decode(std::span<const DeviceExpert* const> experts, const float* x, int m_rows, float* out,
                       DeviceBuffer& scratch, void* stream = nullptr);

}  // namespace eq::exec::cuda

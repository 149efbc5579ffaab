// The gated delta net of a linear-attention layer on the GPU, for the
// decoder layers run there (device_layers.h): model/linear_attention.h's
// computation step for step on rows already on the GPU, its conv and
// recurrent states kept there with the layer's other cache rows.
//
//   in_proj (cuBLAS float32; the fused layout regrouped into the separate
//   one); the causal conv + SiLU per channel (a thread a channel over the
//   call's positions, its window in registers); the L2 norms of q and k and
//   the gates beta and g; the delta rule one position after another (a block
//   a (sequence, value head), a column of the state [dk, dv] in the registers
//   of up to four threads); the gated RMSNorm per value head; out_proj.
//
// The CPU runs a prefill in the chunked form and a decode token by token;
// here every call runs token by token, the same outputs in another order of
// summation (linear_attention.h: the two agree to rounding).
#pragma once

#include <cstdint>

#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "model/config.h"
#include "model/weights.h"

namespace eq::exec::cuda {

// The widest key head and value head the delta rule's kernel holds a state
// of (a column on up to 4 threads of 32 rows each, up to kMaxDeltaThreads
// threads a block), and the longest conv kernel.
inline constexpr int64_t kMaxDeltaKeyDim = 128;
inline constexpr int64_t kMaxDeltaValueDim = 128;
inline constexpr int kMaxDeltaThreads = 512;
inline constexpr int64_t kMaxDeltaConvKernel = 8;

// Layer l's gated delta net on the GPU: its projections' GPU copies
// (device_matrix) and its small tensors.
struct DeltaNetWeights {
  DenseMatrix qkvz, qkv, z, out;
  DeviceBuffer input_norm, ba, b, a, conv, dt_bias, a_log, norm;
};

// Fills `w` and says whether layer l's gated delta net runs on the GPU: its
// projections are GPU matrices (not quantized, not left on the CPU for want of
// room) and its widths within the kernels'.
bool load_device_delta_net(const model::WeightStore& store, const model::ModelConfig& c, int64_t l,
                           DeltaNetWeights& w);

// A cache's states of one such layer: conv [batch][kernel - 1][conv_dim],
// recurrent [batch][value heads][dk][dv] (model/kv_cache.h's layout).
struct DeltaNetState {
  DeviceBuffer conv, recurrent;
};
size_t delta_net_conv_bytes(const model::ModelConfig& c, int64_t batch);
size_t delta_net_recurrent_bytes(const model::ModelConfig& c, int64_t batch);

// The call's rows, grown as needed and kept.
class DeviceDeltaNet {
 public:
  // out [batch * seq_len, hidden] = the layer's attention output for the
  // normed rows xn (device, the same shape), positions start .. of each
  // sequence; the states are read and updated (zeroed first when start is
  // 0). Enqueued on `stream` (a cudaStream_t; null: the calling thread's
  // default stream), nothing synchronized.
  void forward(const model::ModelConfig& c, const DeltaNetWeights& w, const float* xn, int64_t batch,
               int64_t seq_len, int64_t start, DeltaNetState& state, float* out, void* stream);

 private:
  DeviceBuffer qkv_, z_, b_, a_, qkvz_, ba_, g_, beta_, o_, wide_;  // wide_: dense_product's scratch
};

}  // namespace eq::exec::cuda

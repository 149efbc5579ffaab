// The packed model's decoder layers on the GPU (`--device cuda`): a
// model::LayerRunner that keeps the hidden state on the GPU across
// consecutive layers and runs each layer there, so a prefill's layer costs
// one round trip to the host (the router's logits) instead of one per
// product, and a decode step's none:
//
//   RMSNorm; q, k, v (cuBLAS float32, the float matrices of
//   device_linear.h) with their biases, the output gate's split, q/k RMSNorm
//   (per head or whole), clamping, RoPE (the model's own cos/sin table) and
//   the keys and values stored in a GPU KV cache (KvCache::attachment); the
//   attention of each query over its visible keys (causal, sliding window,
//   sink logit) as an online softmax; the output gate; o_proj; the residual.
//   Latent attention the same way in the latent space: each head's query
//   absorbed into the cached [norm(latent) | RoPE(k_rope)] rows, its value
//   W_v times its latent context.
//   RMSNorm; the router's logits on the GPU; the routing on the GPU at a
//   decode step that takes routed decode (device_routing.h: auto dispatch at
//   most its cutoff of tokens, cuda_dispatch.h's routes_on_device), else on
//   the host (the CPU's code); the routed experts through the CUDA
//   dispatch's strategy (device_moe.h) on the rows already there, the
//   gate-weighted combine in slot order, the (gated) shared expert; or a
//   dense MLP; the residual.
//
//   A gated delta net (linear-attention) layer's attention part the same way
//   through device_delta_net.h, its conv and recurrent states in the GPU
//   cache.
//
// A layer runs here when its projections are on the GPU and its widths within
// the kernels'; others (quantized attention projections, matrices that found
// no room) run on the CPU as before, and the hidden state crosses over around
// them. Within a layer that
// runs here, a feed-forward part that cannot (a MoE block under an observer,
// which wants the block's values, a CPU dispatch, a packed shared expert or
// dense MLP) runs on the CPU on rows copied over and back.
// A decode step whose layers all run here, with every MoE layer routed on
// the GPU, is captured once as a CUDA graph and replayed at the next
// positions (step_graph.h; EXPERTQUANT_GPU_GRAPH=0 turns that off, for
// measurement): the same kernels on the same buffers, so the same bits.
// Results equal the CPU forward's within float32 rounding (the products' and
// softmax's order of summation); near-tied router choices may differ.
#pragma once

#include <cstdint>
#include <memory>

#include "model/layer_runner.h"

namespace eq::model {
class Model;
}

namespace eq::exec::cuda {

// The runner for `model` (which it must not outlive), or null when
// EXPERTQUANT_GPU_LAYERS=0 (for measurement: every layer on the CPU, its
// products on the GPU as before). Throws eq::Error (unsupported) in a build
// without CUDA.
std::unique_ptr<model::LayerRunner> make_device_layers(model::Model& model);

// Over every runner of the process: layer calls run on the GPU, and those of
// them whose feed-forward part ran on the CPU.
struct DeviceLayerStats {
  int64_t layers_run = 0, feed_forward_on_cpu = 0;
  int64_t moe_routed = 0;  // MoE layer calls routed on the GPU (device_routing.h, device_moe.h's routed decode)
  // Decode steps captured as a CUDA graph, and steps that launched one (step_graph.h).
  int64_t graph_captures = 0, graph_replays = 0;
};
DeviceLayerStats device_layer_stats();

}  // namespace eq::exec::cuda

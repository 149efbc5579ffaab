// A Dispatch (exec/dispatch.h) whose routed experts run on the GPU: the
// packed model's router, attention and combine stay where they are (the
// CPU), each MoE call's token rows go to the GPU, run_moe (device_moe.h)
// computes the pairs' slot rows with the same strategy on the GPU, and the
// rows come back. So every command that runs a packed model through its
// dispatch (eval's quality pass and latency sweep, perplexity, generate,
// tune) runs its experts on the GPU with `--device cuda`.
//
// Layers are copied to the GPU on first use and stay; when the next layer
// does not fit in the GPU's free memory, the least recently used layers are
// freed first (the weights then stream layer by layer: cuda_dispatch_stats()
// says how many copies that took).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "exec/dispatch.h"

namespace eq::exec::cuda {

std::shared_ptr<const Dispatch> make_cuda_dispatch(DispatchKind kind, int64_t sort_cutoff);

// Whether `d` is one of make_cuda_dispatch's.
bool is_cuda_dispatch(const Dispatch& d);

// What d.run() does for rows already on the GPU: slot_out [tokens * top_k,
// hidden] (device) for x [tokens, hidden] (device) and expert_ids [tokens *
// top_k] (host), `layer` copied to the GPU as run() does. Enqueued on the
// calling thread's default stream, not synchronized. `d` must be a CUDA
// dispatch.
void run_on_device(const Dispatch& d, const PackedLayer& layer, const float* x, int64_t tokens, int64_t top_k,
                   const int32_t* expert_ids, float* slot_out);

// Whether run_routed_on_device takes a call of `tokens` tokens of top_k
// experts each: `d` is a CUDA dispatch of kind auto, tokens <= its
// sort_cutoff, the pairs within kMaxRoutedPairs, the experts and top_k
// within the GPU router's (device_routing.h), and the layer takes routed
// decode (device_moe.h; it is copied to the GPU to know).
// EXPERTQUANT_GPU_ROUTED=0 says no to every call (for measurement).
bool routes_on_device(const Dispatch& d, const PackedLayer& layer, int64_t tokens, int64_t top_k);
// run_on_device with the expert ids in device memory (run_moe_routed).
void run_routed_on_device(const Dispatch& d, const PackedLayer& layer, const float* x, int64_t tokens,
                          int64_t top_k, const int32_t* expert_ids, float* slot_out);

// Runs `enqueue`, which puts work on `stream` that reads or writes the
// dispatches' shared scratch without a run_* call (a CUDA graph captured from
// them: step_graph.h), ordered after every MoE call enqueued so far and before
// every later one.
void order_moe_calls(void* stream, const std::function<void()>& enqueue);

struct CudaDispatchStats {
  int64_t layers_resident = 0;  // layers on the GPU now
  int64_t layer_uploads = 0;    // layer copies to the GPU so far (more than the layers: streamed)
  int64_t layer_evictions = 0;  // layers freed to make room
  uint64_t bytes_uploaded = 0;
};
// The current GPU's name ("" without one).
std::string gpu_name();

// Over every CUDA dispatch of the process (they share the GPU's copies).
CudaDispatchStats cuda_dispatch_stats();

}  // namespace eq::exec::cuda

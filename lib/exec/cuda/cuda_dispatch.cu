// The GPU dispatch (cuda_dispatch.h): a registry of layers on the GPU shared
// by every CUDA dispatch of the process, and the Dispatch around run_moe.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/env_switch.h"
#include "core/error.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_moe.h"
#include "exec/cuda/device_routing.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check;
using quant::cuda::stream_of;

namespace {

uint64_t layer_bytes(const PackedLayer& l) {
  uint64_t b = 0;
  for (const BitGroup& g : l.groups)
    for (const ExpertWeights& w : g.slots)
      for (const quant::PackedMatrix* m : {&w.gate, &w.up, &w.down})
        for (const quant::PartView& p : m->parts) b += p.nbytes;
  return b;
}

class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }
  std::mutex mu;

  // The layer's GPU copy, uploaded (evicting least recently used layers when
  // it does not fit) on first use. Caller holds mu.
  const DeviceMoeLayer& layer(const PackedLayer& l) {
    auto it = resident_.find(l.serial);
    if (it != resident_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.pos);
      return it->second.layer;
    }
    // Free memory is kept beside the layers for the calls' scratch (gathered
    // rows, the prefill's bf16 operands).
    const uint64_t need = layer_bytes(l) + gpu_headroom_bytes();
    size_t free_bytes = gpu_free_bytes();
    // Work queued by earlier calls (a routed decode step waits for nothing on
    // the host) may still read what is freed: it finishes first.
    if (free_bytes < need && !lru_.empty()) check(cudaDeviceSynchronize(), "finish the GPU's work before freeing");
    while (free_bytes < need && !lru_.empty()) {
      resident_.erase(lru_.back());
      lru_.pop_back();
      ++stats_.layer_evictions;
      scratch.work = DeviceBuffer();  // the scratch regrows as needed
      scratch.call = DeviceBuffer();
      free_bytes = gpu_free_bytes();
    }
    lru_.push_front(l.serial);
    Entry e{upload(l), lru_.begin()};
    ++stats_.layer_uploads;
    stats_.bytes_uploaded += e.layer.nbytes;
    return resident_.emplace(l.serial, std::move(e)).first->second.layer;
  }
  CudaDispatchStats stats() {
    CudaDispatchStats s = stats_;
    s.layers_resident = static_cast<int64_t>(resident_.size());
    return s;
  }

  DeviceMoeScratch scratch;
  DeviceBuffer x, out;
  PinnedBuffer x_staging, out_staging;

  // The scratch is shared by every caller's stream: each call's work waits
  // for the previous call's (queued on another thread's stream, it may not
  // have run when the lock passes on). Caller holds mu. A call captured into
  // a CUDA graph is ordered when the graph is launched (order_moe_calls), not
  // here: its stream may wait only on events recorded in the same capture.
  void begin(cudaStream_t s) {
    if (last_call_ && !stream_capturing(s)) check(cudaStreamWaitEvent(s, last_call_, 0), "wait for the previous MoE call");
  }
  void end(cudaStream_t s) {
    if (stream_capturing(s)) return;
    if (!last_call_) check(cudaEventCreateWithFlags(&last_call_, cudaEventDisableTiming), "create an event");
    check(cudaEventRecord(last_call_, s), "record the MoE call");
  }

 private:
  struct Entry {
    DeviceMoeLayer layer;
    std::list<uint64_t>::iterator pos;
  };
  // By PackedLayer::serial. A freed layer's copy stays until the room is
  // needed (a process runs one model; tests run many, each with new serials).
  std::unordered_map<uint64_t, Entry> resident_;
  std::list<uint64_t> lru_;  // most recently used first
  CudaDispatchStats stats_;
  cudaEvent_t last_call_ = nullptr;  // kept for the process's life, as the registry
};

class CudaDispatch : public Dispatch {
 public:
  CudaDispatch(DispatchKind kind, int64_t sort_cutoff) : kind_(kind), sort_cutoff_(sort_cutoff) {}
  DispatchKind kind() const override { return kind_; }
  int64_t cutoff() const { return sort_cutoff_; }
  std::string name() const override { return std::string(dispatch_kind_name(kind_)); }
  int64_t sort_cutoff() const override { return kind_ == DispatchKind::kAuto ? sort_cutoff_ : -1; }
  void run(const MoeWork& work, DispatchScratch&) const override {
    Registry& r = Registry::get();
    std::lock_guard<std::mutex> lock(r.mu);
    const DeviceMoeLayer& d = r.layer(*work.layer);
    const size_t in = static_cast<size_t>(work.tokens * work.hidden) * sizeof(float);
    const size_t out = static_cast<size_t>(work.tokens * work.top_k * work.hidden) * sizeof(float);
    r.begin(stream_of(nullptr));
    grow(r.x, in);
    grow(r.out, out);
    copy_to_device(r.x.data(), work.x, in, r.x_staging);
    run_moe(d, kind_, sort_cutoff_, r.x.floats(), work.tokens, work.top_k, work.expert_ids, r.out.floats(), r.scratch);
    r.end(stream_of(nullptr));
    copy_from_device(work.slot_out, r.out.data(), out, r.out_staging);  // waits for the stream's work
  }

 private:
  DispatchKind kind_;
  int64_t sort_cutoff_;
};

}  // namespace

std::shared_ptr<const Dispatch> make_cuda_dispatch(DispatchKind kind, int64_t sort_cutoff) {
  quant::cuda::require_gpu();
  return std::make_shared<CudaDispatch>(kind, sort_cutoff);
}

bool is_cuda_dispatch(const Dispatch& d) { return dynamic_cast<const CudaDispatch*>(&d) != nullptr; }

void run_on_device(const Dispatch& d, const PackedLayer& layer, const float* x, int64_t tokens, int64_t top_k,
                   const int32_t* expert_ids, float* slot_out) {
  const auto* cd = dynamic_cast<const CudaDispatch*>(&d);
  EQ_CHECK(cd != nullptr, "run_on_device: the dispatch " + d.name() + " does not run on the GPU");
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.begin(stream_of(nullptr));
  run_moe(r.layer(layer), cd->kind(), cd->cutoff(), x, tokens, top_k, expert_ids, slot_out, r.scratch);
  r.end(stream_of(nullptr));
}

bool routes_on_device(const Dispatch& d, const PackedLayer& layer, int64_t tokens, int64_t top_k) {
  static const bool on = env_switch("EXPERTQUANT_GPU_ROUTED", true);
  const auto* cd = dynamic_cast<const CudaDispatch*>(&d);
  if (!on || cd == nullptr || cd->kind() != DispatchKind::kAuto || tokens > cd->cutoff() ||
      tokens * top_k > kMaxRoutedPairs || layer.num_experts > kMaxDeviceRouterExperts || top_k > kMaxDeviceRouterTopK)
    return false;
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.layer(layer).routed;
}

void run_routed_on_device(const Dispatch& d, const PackedLayer& layer, const float* x, int64_t tokens,
                          int64_t top_k, const int32_t* expert_ids, float* slot_out) {
  EQ_CHECK(dynamic_cast<const CudaDispatch*>(&d) != nullptr,
           "run_routed_on_device: the dispatch " + d.name() + " does not run on the GPU");
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.begin(stream_of(nullptr));
  run_moe_routed(r.layer(layer), x, tokens, top_k, expert_ids, slot_out, r.scratch);
  r.end(stream_of(nullptr));
}

void order_moe_calls(void* stream, const std::function<void()>& enqueue) {
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.begin(stream_of(stream));
  enqueue();
  r.end(stream_of(stream));
}

std::string gpu_name() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return "";
  return prop.name;
}

CudaDispatchStats cuda_dispatch_stats() {
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.stats();
}

}  // namespace eq::exec::cuda

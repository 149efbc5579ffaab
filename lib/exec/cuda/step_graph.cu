// A decode step's GPU work as one CUDA graph (step_graph.h).
#include <cuda_runtime.h>

#include <exception>

#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/step_graph.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check;
using quant::cuda::stream_of;

StepGraphs::~StepGraphs() {
  for (auto& [key, e] : entries_)
    if (e.exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e.exec));
}

StepGraphs::Ran StepGraphs::run(int64_t first, int64_t last, int64_t batch, const std::vector<uint64_t>& state,
                                void* stream, const std::function<int64_t()>& enqueue, int64_t* tally) {
  if (!on_) {
    *tally = enqueue();
    return Ran::kAsIs;
  }
  Entry& e = entries_[Key{first, last, batch}];
  bool same = e.state == state && e.thread == std::this_thread::get_id() && e.freed == device_buffers_freed();
  if (same && e.current) {
    if (launch(e, stream)) {
      *tally = e.tally;
      return Ran::kReplayed;
    }
    same = false;  // a buffer was freed meanwhile (another thread's eviction)
  }
  if (same && e.warm && capture(e, stream, enqueue)) {
    *tally = e.tally;
    return Ran::kCaptured;
  }
  e.current = false;
  *tally = enqueue();
  e.state = state;
  e.thread = std::this_thread::get_id();
  e.freed = device_buffers_freed();
  e.warm = true;
  return Ran::kAsIs;
}

bool StepGraphs::capture(Entry& e, void* stream, const std::function<int64_t()>& enqueue) {
  const cudaStream_t s = stream_of(stream);
  // Thread-local mode: a call of this thread that cannot be captured (an
  // allocation, a synchronous copy) fails instead of running.
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    on_ = false;
    return false;
  }
  bool ok = true;
  int64_t tally = 0;
  try {
    tally = enqueue();
  } catch (...) {
    ok = false;  // the capture ends below; the step then runs as it is
  }
  cudaGraph_t graph = nullptr;
  ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && ok && graph != nullptr;
  cudaGraphExec_t exec = static_cast<cudaGraphExec_t>(e.exec);
  if (ok) {
    // The key's earlier graph takes the new one's parameters when their
    // launches match (another cache's rows): cheaper than instantiating.
    cudaGraphExecUpdateResultInfo info{};
    if (exec == nullptr || cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {
      if (exec) cudaGraphExecDestroy(exec);
      exec = nullptr;
      ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    }
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture's or update's error is not the next call's
  if (!ok) {  // something in the step cannot be captured: it runs as it is from now on
    if (exec) cudaGraphExecDestroy(exec);
    e.exec = nullptr;
    e.current = false;
    on_ = false;
    return false;
  }
  e.exec = exec;
  e.tally = tally;
  e.current = true;
  e.freed = device_buffers_freed();
  if (launch(e, stream)) return true;
  e.current = false;  // a buffer was freed meanwhile: the step runs as it is
  return false;
}

bool StepGraphs::launch(const Entry& e, void* stream) {
  bool launched = false;
  order_moe_calls(stream, [&] {
    // Under the dispatches' lock, which every eviction of an expert layer
    // and its scratch holds: nothing the graph reads is freed before it runs.
    if (device_buffers_freed() != e.freed) return;
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(e.exec), stream_of(stream)), "launch a decode step's graph");
    launched = true;
  });
  return launched;
}

}  // namespace eq::exec::cuda

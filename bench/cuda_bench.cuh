// What the GPU benchmarks (bench/*.cu) share: a CUDA error check that ends
// the program, event timing and CUDA graphs of enqueued work, the copy kernel
// whose rate they measure bandwidth against, and the comma lists of their
// options.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace eq::bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Milliseconds between events recorded on `s` around `enqueue()`: the work it
// enqueues, and the host's time to enqueue it when that is longer.
template <class Enqueue>
float event_ms(cudaStream_t s, const Enqueue& enqueue, const char* what) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, s);
  enqueue();
  cudaEventRecord(e1, s);
  check(cudaEventSynchronize(e1), what);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

// The work `enqueue()` puts on `s`, captured once as a CUDA graph; empty when
// it cannot be captured (the capture is then abandoned).
class CapturedGraph {
 public:
  template <class Enqueue>
  CapturedGraph(cudaStream_t s, const Enqueue& enqueue) {
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return;
    bool ok = true;
    try {
      enqueue();
    } catch (...) {
      ok = false;
    }
    cudaGraph_t g = nullptr;
    ok = cudaStreamEndCapture(s, &g) == cudaSuccess && ok && g != nullptr;
    if (ok) ok = cudaGraphInstantiate(&exec_, g, 0) == cudaSuccess;
    if (g) cudaGraphDestroy(g);
    if (!ok) {
      exec_ = nullptr;
      cudaGetLastError();
    }
  }
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  explicit operator bool() const { return exec_ != nullptr; }
  void launch(cudaStream_t s) const { check(cudaGraphLaunch(exec_, s), "graph launch"); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

static __global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// Two device buffers of `mib` MiB each for the copy kernel.
struct CopyPool {
  float4 *a = nullptr, *b = nullptr;
  size_t bytes = 0;
  unsigned blocks = 0;
  CopyPool(size_t mib, cudaStream_t s) : bytes(mib << 20) {
    check(cudaMalloc(&a, bytes), "allocate");
    check(cudaMalloc(&b, bytes), "allocate");
    check(cudaMemsetAsync(a, 1, bytes, s), "memset");
    check(cudaMemsetAsync(b, 2, bytes, s), "memset");
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
    blocks = static_cast<unsigned>(sms * 8);
  }
  ~CopyPool() {
    cudaFree(a);
    cudaFree(b);
  }
};

// GB/s of bytes read + written by the copy kernel over the whole pool (a to
// b and back), best of 5 of 10 copies each.
inline double copy_gbps(const CopyPool& pool, cudaStream_t s) {
  const size_t n = pool.bytes / sizeof(float4);
  copy_kernel<<<pool.blocks, 256, 0, s>>>(pool.a, pool.b, n);
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const float ms = event_ms(s, [&] {
      for (int i = 0; i < 10; ++i)
        copy_kernel<<<pool.blocks, 256, 0, s>>>(i % 2 ? pool.b : pool.a, i % 2 ? pool.a : pool.b, n);
    }, "copy");
    best = std::max(best, 2.0 * pool.bytes * 10 / (ms * 1e-3) / 1e9);
  }
  return best;
}

inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

}  // namespace eq::bench

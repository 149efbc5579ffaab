// The GPU's presence, and the helpers of cuda_common.cuh that run on the host.
#include <mutex>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/quantize_common.h"

namespace eq::quant::cuda {

std::string unavailable_reason() {
  static const std::string why = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string("no usable CUDA GPU (") + cudaGetErrorString(e) + ")";
    if (n == 0) return std::string("no CUDA GPU found");
    return std::string();
  }();
  return why;
}

void require_gpu() {
  const std::string why = unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
}

std::vector<float> importance_by_group(const float* importance, int64_t cols, int group) {
  std::vector<float> h(static_cast<size_t>(cols));
  for (int64_t g = 0; g < cols / group; ++g) group_importance(importance, g * group, group, h.data() + g * group);
  return h;
}

}  // namespace eq::quant::cuda

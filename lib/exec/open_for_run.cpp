#include "exec/open_for_run.h"

#include "exec/cuda/cuda_dispatch.h"

namespace eq::exec {

std::shared_ptr<const Dispatch> make_dispatch_on(const RuntimeConfig& runtime, DispatchKind kind) {
  if (runtime.device == quant::Device::kCuda) {
    quant::require_device(runtime.device);
    return cuda::make_cuda_dispatch(kind, runtime.cuda_sort_cutoff);
  }
  return make_dispatch(kind, runtime.sort_cutoff);
}

std::unique_ptr<PackedModel> open_for_run(const std::string& folder, const PackedModelOptions& options,
                                          DispatchKind dispatch, const RuntimeConfig& runtime) {
  PackedModelOptions on = options;
  if (runtime.device == quant::Device::kCuda) {
    quant::require_device(runtime.device);
    on.dense_device = quant::Device::kCuda;
  }
  auto pm = PackedModel::open(folder, on);
  pm->set_dispatch(make_dispatch_on(runtime, dispatch));
  pm->set_mlp_kernel_thresholds(runtime.mlp_kernels);
  return pm;
}

}  // namespace eq::exec

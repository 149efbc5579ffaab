#include "exec/open_for_run.h"

namespace eq::exec {

std::unique_ptr<PackedModel> open_for_run(const std::string& folder, const PackedModelOptions& options,
                                          DispatchKind dispatch, const RuntimeConfig& runtime) {
  auto pm = PackedModel::open(folder, options);
  pm->set_dispatch(make_dispatch(dispatch, runtime.sort_cutoff));
  pm->set_mlp_kernel_thresholds(runtime.mlp_kernels);
  return pm;
}

}  // namespace eq::exec

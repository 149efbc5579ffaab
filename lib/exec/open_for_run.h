// A packed model set up the way the commands that run one (eval, generate)
// need it: opened, then dispatching with one strategy at the runtime config's
// sort cutoff and choosing its expert-MLP kernels by the runtime config's
// thresholds (runtime_config.h), its routed experts on the runtime config's
// device (the GPU: exec/cuda/cuda_dispatch.h), and there too its float
// matrices (exec/cuda/device_linear.h).
#pragma once

#include <memory>
#include <string>

#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "exec/runtime_config.h"

namespace eq::exec {

std::unique_ptr<PackedModel> open_for_run(const std::string& folder, const PackedModelOptions& options,
                                          DispatchKind dispatch, const RuntimeConfig& runtime);

// The strategy `kind` on runtime.device, at that device's sort cutoff.
std::shared_ptr<const Dispatch> make_dispatch_on(const RuntimeConfig& runtime, DispatchKind kind);

}  // namespace eq::exec

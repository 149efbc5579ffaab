#include "exec/panel_gemm.h"

#include "core/cpu_features.h"

namespace eq::exec {

PanelGemmFn active_panel_gemm() {
  switch (active_isa()) {
    case Isa::kAvx512: return kernels::panel_gemm_avx512;
    case Isa::kAvx2: return kernels::panel_gemm_avx2;
    default: return kernels::panel_gemm_generic;
  }
}

}  // namespace eq::exec

#include "quant/panel_transpose.h"

#include "core/cpu_features.h"

namespace eq::quant {

RowsToPanelFn active_rows_to_panel() {
  return active_isa() >= Isa::kAvx512 ? kernels::rows_to_panel_avx512 : kernels::rows_to_panel_generic;
}

}  // namespace eq::quant

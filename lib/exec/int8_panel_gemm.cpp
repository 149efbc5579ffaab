#include "exec/int8_panel_gemm.h"

#include <cstdlib>

#include "core/cpu_features.h"
#include "core/env_switch.h"

namespace eq::exec {

Int8BatchKernels active_int8_batch_kernels() {
  // EXPERTQUANT_BATCH_INT8=0 keeps every format on the fp32 path (to measure
  // one path against the other, bench/batch_mlp_core). Read once.
  static const bool disabled = !env_switch("EXPERTQUANT_BATCH_INT8", true);
  if (disabled) return {kernels::quantize_rows_int8_generic, nullptr};
  // The integer path needs vpdpbusd (AVX-512 VNNI): AVX2's vpmaddubsw
  // saturates, and the scalar loop is a reference, far slower than the fp32
  // panels. Those ISAs keep the fp32 path (gemm = null; docs/design.md).
  if (active_isa() == Isa::kAvx512)
    return {kernels::quantize_rows_int8_avx512, kernels::int8_panel_gemm_avx512};
  return {kernels::quantize_rows_int8_generic, nullptr};
}

}  // namespace eq::exec

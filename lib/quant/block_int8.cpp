#include "quant/block_int8.h"

#include "core/cpu_features.h"

namespace eq::quant {

QuantizeBlockInt8Fn active_quantize_block_int8() {
  return active_isa() >= Isa::kAvx512 ? kernels::quantize_block_int8_avx512 : kernels::quantize_block_int8_generic;
}

}  // namespace eq::quant

#include "quant/trellis/kernels.h"

#include "core/cpu_features.h"

namespace eq::quant::trellis {

const Kernels& kernels() {
  switch (active_isa()) {
    case Isa::kAvx512: return avx512_kernels();
    case Isa::kAvx2: return avx2_kernels();
    default: return generic_kernels();
  }
}

}  // namespace eq::quant::trellis

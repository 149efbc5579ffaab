#include "quant/device.h"

#include "core/error.h"
#include "quant/cuda/cuda_quantize.h"

namespace eq::quant {

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  invalid("--device '" + std::string(name) + "' is not a device (cpu, cuda)");
}

void require_device(Device d) {
  if (d == Device::kCpu) return;
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
}

}  // namespace eq::quant

#include "quant/device.h"

#include <atomic>
#include <charconv>
#include <vector>

#include "core/error.h"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/gpus.h"

namespace eq::quant {

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name.starts_with("cuda:")) {
    std::vector<int> ids;
    std::string_view rest = name.substr(5);
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      int id = -1;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
      if (item.empty() || ec != std::errc() || end != item.data() + item.size() || id < 0)
        invalid("--device '" + std::string(name) + "': expected cuda:N[,N...] with GPU indices");
      for (int seen : ids)
        if (seen == id) invalid("--device '" + std::string(name) + "': GPU " + std::to_string(id) + " listed twice");
      ids.push_back(id);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    cuda::select_gpus(ids);
    return Device::kCuda;
  }
  invalid("--device '" + std::string(name) + "' is not a device (cpu, cuda, cuda:0,1)");
}

std::string_view device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

TrellisSearch parse_trellis_search(std::string_view name) {
  if (name == "exact") return TrellisSearch::kExact;
  if (name == "half") return TrellisSearch::kHalf;
  invalid("--trellis-search '" + std::string(name) + "' is not a trellis search (exact, half)");
}

std::string_view trellis_search_name(TrellisSearch s) { return s == TrellisSearch::kHalf ? "half" : "exact"; }

namespace {
std::atomic<TrellisSearch> gpu_trellis_search{TrellisSearch::kExact};
}  // namespace

void set_trellis_search(TrellisSearch s) { gpu_trellis_search = s; }
TrellisSearch trellis_search() { return gpu_trellis_search; }

void require_device(Device d) {
  if (d == Device::kCpu) return;
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
  cuda::use_gpu(0);  // the calling thread's quantizers: the first GPU chosen
}

size_t device_count(Device d) { return d == Device::kCuda ? cuda::gpu_count() : 1; }

void bind_device(Device d, size_t worker) {
  if (d == Device::kCuda) cuda::use_gpu(worker);
}

}  // namespace eq::quant

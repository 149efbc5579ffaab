// The CUDA executor in a build without CUDA (EQ_CUDA off; CMake leaves this
// file out otherwise): every call says so.
#include <string>

#include "core/error.h"
#include "exec/cuda/device_exec.h"

namespace eq::exec::cuda {

namespace {
constexpr const char* kWhy = "this build has no CUDA support (configure with -DEQ_CUDA=ON)";
[[noreturn]] void refuse() { unsupported(std::string("GPU decode: ") + kWhy); }
}  // namespace

std::string unavailable_reason() { return kWhy; }

DeviceBuffer::DeviceBuffer(size_t size) : size_(size) {
  if (size_ > 0) refuse();
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  p_ = o.p_;
  size_ = o.size_;
  o.p_ = nullptr;
  o.size_ = 0;
  return *this;
}
void DeviceBuffer::upload(const void*, size_t, size_t) { refuse(); }
void DeviceBuffer::download(void*, size_t, size_t) const { refuse(); }

quant::DeviceGemvJob DeviceMatrix::job(const float* x, float* y) const {
  quant::DeviceGemvJob j;
  j.x = x;
  j.y = y;
  return j;
}
DeviceMatrix upload(const quant::PackedMatrix&) { refuse(); }
void gemv(const quant::FormatTraits&, int64_t, int64_t, std::span<const quant::DeviceGemvJob>, int, void*, DeviceBuffer*) {
  refuse();
}
void synchronize(void*) { refuse(); }
DeviceExpert upload(const ExpertWeights&) { refuse(); }
void expert_mlp_decode(std::span<const DeviceExpert* const>, const float*, int, float*, DeviceBuffer&, void*) {
  refuse();
}

}  // namespace eq::exec::cuda

// The CUDA executor in a build without CUDA (EQ_CUDA off; CMake leaves this
// file out otherwise): every call says so.
#include <string>

#include "core/error.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_delta_net.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_layers.h"
#include "exec/cuda/device_linear.h"
#include "exec/cuda/device_moe.h"
#include "exec/cuda/device_routing.h"

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
bool gated_down(int64_t, int64_t) { refuse(); }
PinnedBuffer::~PinnedBuffer() = default;  // a build without CUDA never allocates one
void* PinnedBuffer::reserve(size_t) { refuse(); }
void copy_to_device(void*, const void*, size_t, PinnedBuffer&, void*) { refuse(); }
void copy_from_device(void*, const void*, size_t, PinnedBuffer&, void*) { refuse(); }
LaneStreams::~LaneStreams() = default;  // a build without CUDA never creates a lane
void LaneStreams::fork(int, void*) { refuse(); }
void LaneStreams::join(int, void*) { refuse(); }
void grow(DeviceBuffer& buf, size_t bytes, void*) {
  if (buf.size() < bytes) buf = DeviceBuffer(bytes);  // refuses
}
DeviceExpert upload(const ExpertWeights&) { refuse(); }
void expert_mlp_decode(std::span<const DeviceExpert* const>, const float*, int, float*, DeviceBuffer&, void*) {
  refuse();
}

quant::DeviceGemmJob gemm_job(const DeviceMatrix&, const float* x, float* y, int64_t m_rows) {
  quant::DeviceGemmJob j;
  j.x = x;
  j.y = y;
  j.m_rows = m_rows;
  return j;
}
void gemm(const quant::FormatTraits&, int64_t, int64_t, std::span<const quant::DeviceGemmJob>, DeviceBuffer&, void*) {
  refuse();
}
DeviceMoeLayer upload(const PackedLayer&) { refuse(); }
std::shared_ptr<const Dispatch> make_cuda_dispatch(DispatchKind, int64_t) { refuse(); }
bool is_cuda_dispatch(const Dispatch&) { return false; }
void run_on_device(const Dispatch&, const PackedLayer&, const float*, int64_t, int64_t, const int32_t*, float*) {
  refuse();
}
bool routes_on_device(const Dispatch&, const PackedLayer&, int64_t, int64_t) { return false; }
void run_routed_on_device(const Dispatch&, const PackedLayer&, const float*, int64_t, int64_t, const int32_t*,
                          float*) {
  refuse();
}
void run_moe_routed(const DeviceMoeLayer&, const float*, int64_t, int64_t, const int32_t*, float*,
                    DeviceMoeScratch&, void*) {
  refuse();
}
DeviceRouter make_device_router(const model::RouterRule&, int64_t, int64_t, const float*, const uint8_t*) {
  refuse();
}
void route_on_device(const DeviceRouter&, const float*, int64_t, int32_t*, float*, void*) { refuse(); }
void order_moe_calls(void*, const std::function<void()>&) { refuse(); }
uint64_t device_buffers_freed() { return 0; }
CudaDispatchStats cuda_dispatch_stats() { return {}; }
std::string gpu_name() { return ""; }
void run_moe(const DeviceMoeLayer&, DispatchKind, int64_t, const float*, int64_t, int64_t, const int32_t*, float*,
             DeviceMoeScratch&, void*) {
  refuse();
}

DeviceDenseOps device_dense_ops(const model::ModelConfig&, const std::function<bool(const std::string&)>&,
                                const model::LinearOps&) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
DenseMatrix device_matrix(const model::LinearOp*) { return {}; }
void dense_product(const DenseMatrix&, const float*, float*, int64_t, void*, DeviceBuffer&) { refuse(); }
void dense_products(std::span<const DenseMatrix>, const float*, float* const*, int64_t, void*, DeviceBuffer&) {
  refuse();
}
DeviceBuffer device_copy(const model::Tensor32Ptr& t) { return DeviceBuffer(t ? t->data.size() * sizeof(float) : 0); }
DenseMatrix device_dense_copy(const model::Tensor32Ptr&, int64_t, int64_t, DeviceBuffer&) { refuse(); }
bool load_device_delta_net(const model::WeightStore&, const model::ModelConfig&, int64_t, DeltaNetWeights&) {
  refuse();
}
size_t delta_net_conv_bytes(const model::ModelConfig&, int64_t) { return 0; }
size_t delta_net_recurrent_bytes(const model::ModelConfig&, int64_t) { return 0; }
void DeviceDeltaNet::forward(const model::ModelConfig&, const DeltaNetWeights&, const float*, int64_t, int64_t,
                             int64_t, DeltaNetState&, float*, void*) {
  refuse();
}
std::unique_ptr<model::LayerRunner> make_device_layers(model::Model&) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
DeviceLayerStats device_layer_stats() { return {}; }
uint64_t device_dense_bytes() { return 0; }
uint64_t device_dense_cpu_bytes() { return 0; }
size_t gpu_free_bytes() { refuse(); }
size_t gpu_headroom_bytes() { refuse(); }

}  // namespace eq::exec::cuda

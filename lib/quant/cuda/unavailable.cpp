// The GPU quantizers in a build without CUDA (EQ_CUDA off; CMake leaves
// this file out otherwise): they say so.
#include "core/error.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/cuda_quantize.h"

namespace eq::quant::cuda {

namespace {
constexpr const char* kWhy = "this build has no CUDA support (configure with -DEQ_CUDA=ON)";
[[noreturn]] QuantizedMatrix refuse(const FormatTraits&, const float*, int64_t, int64_t, const QuantizeOptions&) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
}  // namespace

std::string unavailable_reason() { return kWhy; }
void select_gpus(const std::vector<int>&) {}
size_t gpu_count() { return 0; }
void use_gpu(size_t) { unsupported(std::string("--device cuda: ") + kWhy); }
bool programmatic_launches() { return false; }
bool allow_programmatic_launches(bool) { return false; }
int set_quantize_once(int) { return -1; }
bool split_x() { return false; }
bool set_split_x_default(bool) { return false; }

QuantizedMatrix quantize_fp4(const FormatTraits& f, const float* w, int64_t r, int64_t c, const QuantizeOptions& o) {
  refuse(f, w, r, c, o);
}
QuantizedMatrix quantize_mxfp4(const FormatTraits& f, const float* w, int64_t r, int64_t c, const QuantizeOptions& o) {
  refuse(f, w, r, c, o);
}
QuantizedMatrix quantize_nvfp4(const FormatTraits& f, const float* w, int64_t r, int64_t c, const QuantizeOptions& o) {
  refuse(f, w, r, c, o);
}
QuantizedMatrix quantize_affine(const FormatTraits& f, const float* w, int64_t r, int64_t c, const QuantizeOptions& o) {
  refuse(f, w, r, c, o);
}
QuantizedMatrix quantize_trellis(const FormatTraits& f, const float* w, int64_t r, int64_t c,
                                 const QuantizeOptions& o) {
  refuse(f, w, r, c, o);
}
void search_tiles(int, const float*, int64_t, const float*, const float*, uint16_t*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
void search_tiles_half(int, const float*, int64_t, const float*, const float*, uint16_t*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}

namespace {
void refuse_gemv(const FormatTraits&, int64_t, int64_t, const DeviceGemvJob*, int, int, void*, void*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
}  // namespace
const DeviceGemv kStreamDeviceGemv{refuse_gemv};
bool device_gemv_int8_input(const FormatTraits&) { return false; }
size_t int8_x_bytes(const FormatTraits&, int, int64_t) { unsupported(std::string("--device cuda: ") + kWhy); }
void quantize_x_int8(const FormatTraits&, const float*, int, int64_t, void*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
const DeviceGemv kInt8RowDeviceGemv{refuse_gemv};
const DeviceGemv kBf16DeviceGemv{refuse_gemv};
const DeviceGemv kTrellisDeviceGemv{refuse_gemv};
void run_gemv_calls(int64_t, int64_t, int, const DeviceGemvCall*, int, void*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
void run_routed_calls(int64_t, int64_t, const FormatTraits* const*, int, const RoutedPairs&, int, void*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
int64_t mixed_gemv_blocks(const FormatTraits&, int64_t, int64_t) { return -1; }
int64_t mixed_gemv_wave() { return 0; }

namespace {
void refuse_gemm(const FormatTraits&, int64_t, int64_t, const DeviceGemmJob*, int, void*, void*) {
  unsupported(std::string("--device cuda: ") + kWhy);
}
}  // namespace
const DeviceGemm kStreamDeviceGemm{refuse_gemm};
const DeviceGemm kInt8RowDeviceGemm{refuse_gemm};
const DeviceGemm kBf16DeviceGemm{refuse_gemm};
const DeviceGemm kTrellisDeviceGemm{refuse_gemm};

}  // namespace eq::quant::cuda

namespace eq::quant {
size_t routed_x_bytes(int64_t, int64_t) { return 0; }
}  // namespace eq::quant

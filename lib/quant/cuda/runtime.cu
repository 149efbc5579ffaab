// The GPU's presence, and the helpers of cuda_common.cuh that run on the host.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "core/env_switch.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/quantize_common.h"

namespace eq::quant::cuda {

namespace {

// The GPUs of this run: set once by parse_device before any quantizer runs,
// filled with every visible GPU on first use otherwise.
std::mutex gpus_mu;
std::vector<int> chosen_gpus;
bool gpus_known = false;

constexpr int kMaxCachedDevices = 64;

int visible_gpus(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("no usable CUDA GPU (") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0) *why = "no CUDA GPU found";
  return n;
}

const std::vector<int>& gpus() {
  std::lock_guard<std::mutex> lock(gpus_mu);
  if (!gpus_known) {
    std::string why;
    const int n = visible_gpus(&why);
    for (int i = 0; i < n; ++i) chosen_gpus.push_back(i);
    gpus_known = true;
  }
  return chosen_gpus;
}

}  // namespace

void select_gpus(const std::vector<int>& ids) {
  std::lock_guard<std::mutex> lock(gpus_mu);
  chosen_gpus = ids;
  gpus_known = !ids.empty();
}

std::string unavailable_reason() {
  std::string why;
  const int n = visible_gpus(&why);
  if (!why.empty()) return why;
  for (int id : gpus())
    if (id >= n) return "GPU " + std::to_string(id) + " is not among the " + std::to_string(n) + " visible";
  return std::string();
}

size_t gpu_count() { return unavailable_reason().empty() ? gpus().size() : 0; }

void use_gpu(size_t worker) {
  const std::vector<int>& ids = gpus();
  EQ_CHECK(!ids.empty(), "no GPU chosen");
  check(cudaSetDevice(ids[worker % ids.size()]), "select GPU");
}

void require_gpu() {
  const std::string why = unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
}

namespace {

// A gated input of m_rows rows of x: `format` must take that many, and they
// must fit the stage.
void check_gated_input(const FormatTraits& format, int m_rows, int64_t cols) {
  EQ_CHECK(m_rows <= format.device_gemv->gated_rows,
           "GPU decode: " + std::string(format.name) + " takes a gated input with at most " +
               std::to_string(format.device_gemv->gated_rows) + " rows of x, not " + std::to_string(m_rows));
  EQ_CHECK(m_rows * cols <= kMaxGatedInput,
           "GPU decode: " + std::string(format.name) + ": a gated input of " + std::to_string(m_rows) + " x " +
               std::to_string(cols) + " floats (at most " + std::to_string(kMaxGatedInput) + ")");
}

}  // namespace

bool gated_call(const FormatTraits& format, const DeviceGemvJob* jobs, int n_jobs, int m_rows, int64_t cols) {
  int gated = 0;
  for (int j = 0; j < n_jobs; ++j) gated += jobs[j].x_up != nullptr;
  EQ_CHECK(gated == 0 || gated == n_jobs, "GPU decode: " + std::string(format.name) + ": " + std::to_string(gated) +
                                              " of " + std::to_string(n_jobs) + " jobs with a gated input");
  if (gated > 0) check_gated_input(format, m_rows, cols);
  return gated > 0;
}

bool gated_routed_call(const FormatTraits& format, const RoutedPairs& pairs, int64_t cols) {
  if (pairs.x_up == nullptr) return false;
  check_gated_input(format, 1, cols);
  return true;
}

namespace {

// read(device), a positive value of the current GPU, read once a device (in
// `cache`, 0: not yet read): one GPU model a process in practice, but each
// device is asked all the same.
template <typename Read>
int once_a_device(std::atomic<int> (&cache)[kMaxCachedDevices], Read read) {
  int device = 0;
  check(cudaGetDevice(&device), "current GPU");
  if (device < kMaxCachedDevices && cache[device].load(std::memory_order_relaxed) > 0)
    return cache[device].load(std::memory_order_relaxed);
  const int value = read(device);
  if (device < kMaxCachedDevices) cache[device].store(value, std::memory_order_relaxed);
  return value;
}

// An attribute of the current GPU.
template <cudaDeviceAttr kAttribute>
int current_gpu_attribute(const char* what) {
  static std::atomic<int> cached[kMaxCachedDevices] = {};
  return once_a_device(cached, [what](int device) {
    int value = 0;
    check(cudaDeviceGetAttribute(&value, kAttribute, device), what);
    return value;
  });
}

}  // namespace

size_t max_shared_bytes() {
  return static_cast<size_t>(
      current_gpu_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>("shared memory per block"));
}

int multiprocessor_count() { return current_gpu_attribute<cudaDevAttrMultiProcessorCount>("multiprocessors"); }

void allow_shared_bytes(const void* kernel) {
  // Once a kernel and GPU: all the dynamic shared memory its static part leaves.
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> allowed;
  int device = 0;
  check(cudaGetDevice(&device), "current GPU");
  std::lock_guard<std::mutex> lock(mu);
  if (allowed.count({kernel, device})) return;
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, kernel), "attributes of a decode kernel");
  const size_t room = max_shared_bytes() - attributes.sharedSizeBytes;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(room)),
        "shared memory of a decode kernel");
  allowed.insert({kernel, device});
}

int load_batch(int max_batch) {
  static const int chosen = [] {
    const char* v = std::getenv("EXPERTQUANT_GPU_LOAD_BATCH");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  return chosen >= 1 && chosen < max_batch ? chosen : max_batch;
}

std::vector<float> importance_by_group(const float* importance, int64_t cols, int group) {
  std::vector<float> h(static_cast<size_t>(cols));
  for (int64_t g = 0; g < cols / group; ++g) group_importance(importance, g * group, group, h.data() + g * group);
  return h;
}

namespace {
__global__ void code_version_probe_kernel() {}

std::atomic<bool>& programmatic_wanted() {
  static std::atomic<bool> wanted{env_switch("EXPERTQUANT_GPU_PDL", true)};
  return wanted;
}
}  // namespace

bool allow_programmatic_launches(bool on) { return programmatic_wanted().exchange(on, std::memory_order_relaxed); }

// On when the code this GPU runs has griddepcontrol: older code's kernels
// could not wait for the grid before them.
bool programmatic_launches() {
  if (!programmatic_wanted().load(std::memory_order_relaxed)) return false;
  static std::atomic<int> known[kMaxCachedDevices] = {};  // 1: yes, 2: no
  return once_a_device(known, [](int) {
           // The probe is built as every kernel of the library: the code this
           // GPU runs (binaryVersion) and the code it came from (ptxVersion,
           // lower when the driver compiled older PTX for a newer GPU) both
           // 9.0 or later.
           cudaFuncAttributes f = {};
           check(cudaFuncGetAttributes(&f, code_version_probe_kernel), "a kernel's attributes");
           return std::min(f.binaryVersion, f.ptxVersion) >= 90 ? 1 : 2;
         }) == 1;
}

}  // namespace eq::quant::cuda

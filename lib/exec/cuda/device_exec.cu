// The CUDA executor's first slice (device_exec.h): device copies of packed
// matrices, the call through FormatTraits::device_gemv, the decode expert MLP.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"
#include "exec/cuda/device_exec.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_quantize.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check;
using quant::cuda::stream_of;

std::string unavailable_reason() { return quant::cuda::unavailable_reason(); }

bool gated_down(int64_t m_rows, int64_t inter) {
  static const bool launch = env_switch("EXPERTQUANT_GPU_SWIGLU_LAUNCH", false);
  return !launch && m_rows * inter <= quant::kMaxGatedInput;
}

size_t gpu_free_bytes() {
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "free GPU memory");
  return free_bytes;
}

size_t gpu_headroom_bytes() {
  const char* v = std::getenv("EXPERTQUANT_GPU_HEADROOM");
  return v != nullptr && *v != '\0' ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : size_t{1} << 30;
}

PinnedBuffer::~PinnedBuffer() {
  if (p_) cudaFreeHost(p_);
}

void* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= size_) return p_;
  if (p_) cudaFreeHost(p_);
  p_ = nullptr;
  size_ = 0;
  check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "allocate page-locked memory");
  size_ = bytes;
  return p_;
}

void copy_to_device(void* dst, const void* src, size_t bytes, PinnedBuffer& staging, void* stream) {
  if (bytes == 0) return;
  void* pinned = staging.reserve(bytes);
  std::memcpy(pinned, src, bytes);
  check(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, stream_of(stream)), "copy to the GPU");
}

void copy_from_device(void* dst, const void* src, size_t bytes, PinnedBuffer& staging, void* stream) {
  if (bytes == 0) return;
  void* pinned = staging.reserve(bytes);
  check(cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, stream_of(stream)), "copy from the GPU");
  check(cudaStreamSynchronize(stream_of(stream)), "wait for the GPU");
  std::memcpy(dst, pinned, bytes);
}

LaneStreams::~LaneStreams() {
  for (void* s : streams_) cudaStreamDestroy(static_cast<cudaStream_t>(s));
  for (void* e : done_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (forked_) cudaEventDestroy(static_cast<cudaEvent_t>(forked_));
}

void LaneStreams::fork(int n, void* stream) {
  if (n <= 1) return;
  if (forked_ == nullptr) {
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "create an event");
    forked_ = e;
  }
  while (static_cast<int>(streams_.size()) < n - 1) {
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "create a stream");
    streams_.push_back(s);
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "create an event");
    done_.push_back(e);
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(forked_), stream_of(stream)), "record the fork");
  for (int i = 1; i < n; ++i)
    check(cudaStreamWaitEvent(static_cast<cudaStream_t>(streams_[static_cast<size_t>(i - 1)]),
                              static_cast<cudaEvent_t>(forked_), 0),
          "wait for the fork");
}

void LaneStreams::join(int n, void* stream) {
  for (int i = 1; i < n; ++i) {
    check(cudaEventRecord(static_cast<cudaEvent_t>(done_[static_cast<size_t>(i - 1)]),
                          static_cast<cudaStream_t>(streams_[static_cast<size_t>(i - 1)])),
          "record a lane's end");
    check(cudaStreamWaitEvent(stream_of(stream), static_cast<cudaEvent_t>(done_[static_cast<size_t>(i - 1)]), 0),
          "wait for a lane");
  }
}

namespace {
std::atomic<uint64_t> g_buffers_freed{0};

// Counted first: a thread that reads the count after the memory is gone sees it changed.
void free_buffer(void* p) {
  ++g_buffers_freed;
  cudaFree(p);
}
}  // namespace

uint64_t device_buffers_freed() { return g_buffers_freed.load(); }

DeviceBuffer::DeviceBuffer(size_t size) : size_(size) {
  if (size_ > 0) check(cudaMalloc(&p_, size_), "allocate");
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) free_buffer(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) free_buffer(p_);
    p_ = o.p_;
    size_ = o.size_;
    o.p_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  EQ_CHECK(offset + bytes <= size_, "device upload past the end of the buffer");
  if (bytes > 0) check(cudaMemcpy(static_cast<char*>(p_) + offset, host, bytes, cudaMemcpyHostToDevice), "copy to GPU");
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  EQ_CHECK(offset + bytes <= size_, "device download past the end of the buffer");
  if (bytes > 0)
    check(cudaMemcpy(host, static_cast<const char*>(p_) + offset, bytes, cudaMemcpyDeviceToHost), "copy from GPU");
}

quant::DeviceGemvJob DeviceMatrix::job(const float* x, float* y) const {
  quant::DeviceGemvJob j;
  for (size_t p = 0; p < parts.size(); ++p) j.parts[p] = parts[p].data();
  j.x = x;
  j.y = y;
  return j;
}

DeviceMatrix upload(const quant::PackedMatrix& m) {
  EQ_CHECK(m.format != nullptr, "device upload of a matrix without a format");
  if (m.format->device_gemv == nullptr)
    unsupported("GPU decode: format " + std::string(m.format->name) + " has no GPU kernel");
  EQ_CHECK(m.parts.size() <= quant::DeviceGemvJob::kMaxParts,
           "GPU decode: " + std::string(m.format->name) + " has " + std::to_string(m.parts.size()) + " parts");
  quant::cuda::require_gpu();
  DeviceMatrix d;
  d.format = m.format;
  d.rows = m.rows;
  d.cols = m.cols;
  for (const quant::PartView& p : m.parts) {
    d.parts.emplace_back(p.nbytes);
    d.parts.back().upload(p.data, p.nbytes);
    d.nbytes += p.nbytes;
  }
  return d;
}

namespace {
size_t scratch_of(const quant::FormatTraits& format, int64_t rows, int64_t cols, int n_jobs, int m_rows) {
  const quant::DeviceGemv& d = *format.device_gemv;
  return d.scratch_bytes ? d.scratch_bytes(format, rows, cols, n_jobs, m_rows) : 0;
}
}  // namespace

void gemv(const quant::FormatTraits& format, int64_t rows, int64_t cols, std::span<const quant::DeviceGemvJob> jobs,
          int m_rows, void* stream, DeviceBuffer* scratch) {
  if (format.device_gemv == nullptr) unsupported("GPU decode: format " + std::string(format.name) + " has no GPU kernel");
  if (jobs.empty()) return;
  const int n = static_cast<int>(jobs.size());
  const size_t need = scratch_of(format, rows, cols, n, m_rows);
  DeviceBuffer local;
  DeviceBuffer& buf = scratch ? *scratch : local;
  grow(buf, need, stream);
  format.device_gemv->run(format, rows, cols, jobs.data(), n, m_rows, need ? buf.data() : nullptr, stream);
  if (!scratch && need) synchronize(stream);
}

void synchronize(void* stream) { check(cudaStreamSynchronize(stream_of(stream)), "synchronize"); }

bool stream_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream_of(stream), &status), "query the stream's capture");
  return status != cudaStreamCaptureStatusNone;
}

void grow(DeviceBuffer& buf, size_t bytes, void* stream) {
  if (buf.size() >= bytes) return;
  if (buf.size() > 0) synchronize(stream);
  buf = DeviceBuffer(bytes);
}

DeviceExpert upload(const ExpertWeights& w) {
  if (w.act != model::Activation{} || w.gate_bias || w.up_bias || w.down_bias)
    unsupported("GPU decode: only SwiGLU experts without biases run on the GPU so far");
  return {upload(w.gate), upload(w.up), upload(w.down)};
}

}  // namespace eq::exec::cuda

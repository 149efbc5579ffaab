// The CUDA executor, first slice (issue #41): packed matrices copied to the
// GPU as stored, the decode product of every format through its row's
// FormatTraits::device_gemv, and the decode expert MLP (gate and up, SwiGLU,
// down) of a set of routed experts. docs/design.md, "GPU decode kernels".
//
// Device pointers are plain pointers and streams are `void*` (a cudaStream_t;
// null: the calling thread's default stream), so this header needs no CUDA
// header. In a build without EQ_CUDA (unavailable.cpp) every call throws
// eq::Error (unsupported) and unavailable_reason() says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/bit_group.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/format.h"

namespace eq::exec::cuda {

// Empty when a CUDA GPU can run the kernels; otherwise one line saying why.
std::string unavailable_reason();

// An owning device allocation of `size` bytes (256-byte aligned).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t size);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), size_(o.size_) { o.p_ = nullptr, o.size_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return p_; }
  float* floats() const { return static_cast<float*>(p_); }
  size_t size() const { return size_; }
  // Synchronous copies of `bytes` bytes at byte `offset`.
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// How many DeviceBuffers have been freed in this process so far. A CUDA graph
// (step_graph.h) holds the addresses it was captured with: while this count
// is what it was then, every buffer that existed then still does.
uint64_t device_buffers_freed();

// A packed matrix on the GPU: each part's bytes as stored (no repack).
struct DeviceMatrix {
  const quant::FormatTraits* format = nullptr;
  int64_t rows = 0, cols = 0;
  std::vector<DeviceBuffer> parts;
  size_t nbytes = 0;  // the packed bytes (sum of the parts)
  // The job y = x W^T for device arrays x [m, cols], y [m, rows].
  quant::DeviceGemvJob job(const float* x, float* y) const;
};

// Copies m's parts to the GPU. Throws eq::Error (unsupported) when the format
// has no device_gemv, or for more parts than DeviceGemvJob holds.
DeviceMatrix upload(const quant::PackedMatrix& m);

// y_j = x_j W_j^T for each job (all of `format`, one shape [rows, cols]),
// 1 <= m_rows <= quant::kMaxDeviceGemvRows; enqueued, not synchronized. The
// format's scratch (DeviceGemv::scratch_bytes) comes from `scratch`, grown
// (synchronously) when too small; without one, a temporary buffer is
// allocated and the call synchronizes before it returns.
void gemv(const quant::FormatTraits& format, int64_t rows, int64_t cols, std::span<const quant::DeviceGemvJob> jobs,
          int m_rows, void* stream = nullptr, DeviceBuffer* scratch = nullptr);

// Waits for everything enqueued on `stream`.
void synchronize(void* stream = nullptr);

// Whether `stream` is being captured into a CUDA graph (step_graph.h).
bool stream_capturing(void* stream = nullptr);

// Makes `buf` at least `bytes` long. An old buffer may still be read by work
// queued on `stream`, so that work finishes before it is freed.
void grow(DeviceBuffer& buf, size_t bytes, void* stream = nullptr);

// Whether a decode down product forms SwiGLU from g and u as it stages its
// input (DeviceGemvJob::x_up) for m_rows rows of `inter` values, rather than
// from h of a SwiGLU launch: when the input fits (quant::kMaxGatedInput),
// unless EXPERTQUANT_GPU_SWIGLU_LAUNCH=1 asks for the launch (for measurement).
bool gated_down(int64_t m_rows, int64_t inter);

// Free memory of the current GPU, and what the executor leaves free beside
// the weights it copies there, for the calls' scratch: 1 GiB, or
// EXPERTQUANT_GPU_HEADROOM bytes (for tests and measurement).
size_t gpu_free_bytes();
size_t gpu_headroom_bytes();

// Page-locked host memory that copies to and from the GPU go through: such a
// copy is one DMA, without the driver's own staging of pageable memory, so a
// small one (a decode step's rows) costs a few microseconds instead of ten.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least `bytes` bytes (the contents are not kept when it grows).
  void* reserve(size_t bytes);

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// dst (device) = src (host), `bytes` bytes, through `staging`: enqueued on
// `stream`; src may be reused when this returns, `staging` once the stream
// has run the copy.
void copy_to_device(void* dst, const void* src, size_t bytes, PinnedBuffer& staging, void* stream = nullptr);
// dst (host) = src (device) after the work queued on `stream`, through
// `staging`; returns when dst holds it.
void copy_from_device(void* dst, const void* src, size_t bytes, PinnedBuffer& staging, void* stream = nullptr);

// Streams that run independent work beside a caller's stream: lane 0 is the
// caller's stream, lanes 1.. are streams of their own, created on first use
// and kept. fork() makes lanes 1..n-1 wait for what is queued on the caller's
// stream; join() makes the caller's stream wait for every lane.
class LaneStreams {
 public:
  LaneStreams() = default;
  ~LaneStreams();
  LaneStreams(const LaneStreams&) = delete;
  LaneStreams& operator=(const LaneStreams&) = delete;

  void fork(int n, void* stream);
  void* lane(int i, void* stream) const { return i == 0 ? stream : streams_[static_cast<size_t>(i - 1)]; }
  void join(int n, void* stream);

 private:
  std::vector<void*> streams_, done_;  // cudaStream_t, cudaEvent_t of lanes 1..
  void* forked_ = nullptr;             // cudaEvent_t
};

// One routed expert's matrices on the GPU (SwiGLU, no biases).
struct DeviceExpert {
  DeviceMatrix gate, up, down;
};
// Throws eq::Error (unsupported) for an activation other than SwiGLU or
// biases, which the first slice does not run on the GPU.
DeviceExpert upload(const ExpertWeights& w);

}  // namespace eq::exec::cuda

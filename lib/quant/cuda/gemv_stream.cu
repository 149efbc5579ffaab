// The GPU decode product of the column bit-stream formats (fp4_gG, mxfp4,
// nvfp4, nl4_gG, affine intB_gG; docs/formats.md, "Column bit stream"), read
// as stored: qweight U32 [K*bits/32, N], scales [K/G, N] (F16, E8M0 or E4M3
// times the F32 tensor_scale), biases F16 [K/G, N].
//
// A thread owns 4 adjacent output columns and a slice of K: it reads the 4
// columns' words of a word row as one 16-byte load (a quarter warp or half warp
// reads 128 or 256 contiguous bytes), so the layout needs no repack. A block is
// 4 * Q columns x S slices of K (Q column quads, S = 256 / Q: 32 columns x 32
// slices, or 64 x 16 when K has few chunks); slice s takes chunks s, s + S, ...
// of CHUNK k each and loads the words of up to kBatch of them before using any.
// The slices' sums meet through shuffles within a warp, then in shared memory
// across warps, in a fixed order. Per chunk and column:
//   dot[m] = sum_k int(code_k) * x[m, k]        (int: the code's integer, below)
//   acc[m] = fma(scale * unit, dot[m], acc[m]);  affine: acc[m] = fma(bias, sum_k x[m, k], acc[m])
// A code becomes a float in registers, without a table in memory: every
// stream code family states its values as integers, value(c) =
// (int8_bytes[c] - int8_offset) * int8_scale (packed_stream.h; affine codes:
// the code itself). The bytes of four 4-bit table codes come from a 16-byte
// table held in four registers (three byte permutes); two bytes become a half2
// (1024 + b) by a permute, minus 1024 + offset (exact: |b - offset| < 256),
// then two floats. Integer codes: a byte b becomes float(b - offset) as the
// float with bits 0x4B0000bb minus 2^23 + offset (a permute and a subtraction).
// Everything the kernel knows of the format comes from the row: bits, group,
// and its StreamEncoding (code integers, scale kind, biases, tensor scale).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_mixed.cuh"
#include "quant/cuda/gemv_stream.cuh"

namespace eq::quant::cuda {

namespace stream {

namespace {

template <int BITS, int CHUNK, int MB, bool HAS_BIASES, bool TABLE, bool VEC>
__global__ void __launch_bounds__(kThreads, MB == 1 ? (CHUNK * BITS / 32 >= 8 ? 3 : 4) : 1)
    stream_gemv_kernel(const __grid_constant__ StreamParams p, const __grid_constant__ LaunchJobs jobs) {
  extern __shared__ float stage[];  // a gated input [m_rows][K]
  __shared__ float partial[kPartialFloats<MB>];
  stream_gemv_block<BITS, CHUNK, MB, HAS_BIASES, TABLE, VEC>(p, jobs.job[blockIdx.y], blockIdx.x, stage, partial);
}

template <int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>
void launch_bits(const StreamParams& p, const LaunchJobs& jobs, int n_jobs, cudaStream_t stream) {
  const int64_t cols = 4LL << p.quads_log2;
  const dim3 grid(static_cast<unsigned>((p.rows + cols - 1) / cols), static_cast<unsigned>(n_jobs));
  const bool vec = p.rows % 4 == 0;
  const size_t smem = p.gated ? static_cast<size_t>(p.m_rows * p.cols) * sizeof(float) : 0;
#define EQ_STREAM_LAUNCH(MB)                                                                          \
  (vec ? stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, true><<<grid, kThreads, smem, stream>>>(p, jobs) \
       : stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, false><<<grid, kThreads, smem, stream>>>(p, jobs))
  switch (rows_bucket(p.m_rows)) {
    case 1: EQ_STREAM_LAUNCH(1); break;
    case 2: EQ_STREAM_LAUNCH(2); break;
    case 4: EQ_STREAM_LAUNCH(4); break;
    default: EQ_STREAM_LAUNCH(8); break;
  }
#undef EQ_STREAM_LAUNCH
}

}  // namespace

StreamParams params_of(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated, Body& body) {
  const StreamLayout l = stream_layout_of(format);
  StreamParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.group = l.group;
  p.scale_kind = static_cast<int>(l.scale_kind);
  p.has_tensor_scale = l.has_tensor_scale;
  // The codes' integers: a table of bytes (4-bit table codes) or the code itself.
  const bool table = l.codes->int8_bytes != nullptr;
  if (table) {
    EQ_CHECK(l.bits == 4, "GPU decode: " + std::string(format.name) + ": a code table of " + std::to_string(l.bits) +
                              "-bit codes");
    for (int c = 0; c < 16; ++c) p.table[c / 4] |= uint32_t{l.codes->int8_bytes[c]} << (8 * (c % 4));
  }
  p.offset = 8388608.0f + static_cast<float>(l.codes->int8_offset);
  p.unit = l.codes->int8_scale;
  // Chunks of 32 k (a whole number of words for every width), 16 for groups of 16 (4-bit only).
  const bool chunk16 = l.group % 32 != 0;
  EQ_CHECK(l.group % 16 == 0 && (!chunk16 || l.bits == 4) && cols % l.group == 0,
           "GPU decode: " + std::string(format.name) + ": " + std::to_string(l.bits) + "-bit codes in groups of " +
               std::to_string(l.group) + " over " + std::to_string(cols) + " columns");
  EQ_CHECK(rows * (cols / 32 * l.bits + cols / l.group) < (int64_t{1} << 31) &&
               (rows + cols) * kMaxDeviceGemvRows < (int64_t{1} << 31),
           "GPU decode: " + std::string(format.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
               "] is too large for 32-bit offsets");
  // 32 slices of K a block when K has enough chunks for them, else 16 (and 64 columns).
  const int64_t chunks = cols / (chunk16 ? 16 : 32);
  p.quads_log2 = chunks >= 48 ? 3 : 4;
  // EXPERTQUANT_GPU_STREAM_COLUMNS=32 or 64 forces the block's columns (for measurement).
  static const int forced = [] {
    const char* v = std::getenv("EXPERTQUANT_GPU_STREAM_COLUMNS");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  if (forced == 32 || forced == 64) p.quads_log2 = forced == 32 ? 3 : 4;
  p.batch = load_batch((chunk16 ? 16 : 32) * l.bits / 32 >= 3 ? 1 : 2);  // the kernels' kBatch
  p.gated = gated;
  // Affine rows (biases, integer codes) come in 2, 3, 4 and 8 bits, the
  // table-code rows (fp4 family, nl4) in 4 bits, in groups of 16 or more.
  const int kind = (l.has_biases ? 100 : 0) + (table ? 1000 : 0) + l.bits * (chunk16 ? -1 : 1);
  switch (kind) {
    case 102: body = Body::kAffine2; break;
    case 103: body = Body::kAffine3; break;
    case 104: body = Body::kAffine4; break;
    case 108: body = Body::kAffine8; break;
    case 1004: body = Body::kTable4; break;
    case 996: body = Body::kTable4Chunk16; break;
    default:
      fail(ErrorKind::kInternal, "GPU decode: no kernel for " + std::to_string(l.bits) + "-bit stream codes" +
                                     (l.has_biases ? " with biases" : "") + (table ? " through a table" : "") +
                                     (chunk16 ? " in groups of 16" : ""));
  }
  return p;
}

namespace {

void run_stream(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                int m_rows, void*, void* stream) {
  check_call(format, m_rows, "GPU decode");
  Body body{};
  const StreamParams p = params_of(format, rows, cols, m_rows, gated_call(format, jobs, n_jobs, m_rows, cols), body);
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    with_body(body, [&]<int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>() {
      launch_bits<BITS, CHUNK, HAS_BIASES, TABLE>(p, batch, n, s);
    });
    check_launch("stream decode kernel");
  });
}

// A block of the launch of several formats (gemv_mixed.cuh).
void segment_of(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated, GemvSegment& seg) {
  Body body{};
  seg.stream = params_of(format, rows, cols, m_rows, gated, body);
  seg.body = static_cast<int>(body);
  seg.blocks_per_job = static_cast<int>((rows + block_columns(seg.stream) - 1) / block_columns(seg.stream));
}

}  // namespace

}  // namespace stream

const DeviceGemv kStreamDeviceGemv{stream::run_stream, nullptr, true, stream::segment_of};

}  // namespace eq::quant::cuda

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
// across warps, in a fixed order.
//
// x: the rows of 2, 4 and 8 bits multiply x as the CPU's decode kernels do
// (gemv.h): x (or its gated input) quantized to int8 in blocks of 32 with an
// fp32 scale, the CPU's integers exactly, in the order its codes come out of
// a word (int8_input.cuh): once a call into the scratch (quantize_jobs or,
// routed, quantize_routed; every call of several rows, and one-row calls
// whose launch takes more than a wave of blocks, quantize_once), one row then
// copied into each block's shared memory; else (one-wave launches, launches
// of several formats) each block quantizes its one row of x there itself. Per
// chunk and column, one dp4a multiplies 4 code bytes by 4 x bytes (unsigned by
// signed), summed exactly in an int32:
//   d[m] = sum_k byte(code_k) q[m, k]
//   acc[m] = fma(scale * unit * x_scale, d[m] - offset * sum_k q[m, k], acc[m])
//   affine: acc[m] = fma(bias, x_scale * sum_k q[m, k], acc[m])
// where every stream code family states its values as integers, value(c) =
// (int8_bytes[c] - int8_offset) * int8_scale (packed_stream.h; affine codes:
// the code itself, masked out of the word). 4-bit table codes take their
// |value| from one of two 8-byte tables by byte permutes, the sign of each
// half riding on its copy of x (code_bytes), so they need no offset. About
// 1.5 instructions a weight, against 6.7 with float x, which bounded the
// kernel (docs/benchmarks.md, "GPU decode"). The 3-bit rows, whose codes
// straddle words, keep float32 x (as on the CPU): a code becomes the float
// with bits 0x4B000000 | c minus 2^23 + offset, times x.
// Everything the kernel knows of the format comes from the row: bits, group,
// and its StreamEncoding (code integers, scale kind, biases, tensor scale).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "quant/cuda/gemv_mixed.cuh"
#include "quant/cuda/gemv_stream.cuh"

namespace eq::quant::cuda {

namespace stream {

namespace {

// Blocks a multiprocessor holds at one row of x (the kernels' launch bounds), by words a chunk.
template <int kWords>
inline constexpr int kOneRowBlocksPerMultiprocessor = kWords >= 8 ? 3 : 4;
int one_row_blocks_per_multiprocessor(Body body) {
  int n = 4;
  with_body(body, [&]<int BITS, int CHUNK, bool, bool>() { n = kOneRowBlocksPerMultiprocessor<CHUNK * BITS / 32>; });
  return n;
}

// Jobs: LaunchJobs, or RoutedJobs (one row of x). X_ONCE: x quantized once a
// call (stream_gemv_block) by a launch ahead of this one that began by
// waiting for the grids before it: so a routed block may read the router's
// ids before its own wait. Every block waits before it exits, so that the
// grid after this one, which waits for this one only, also comes after the
// quantization.
template <int BITS, int CHUNK, int MB, bool HAS_BIASES, bool TABLE, bool VEC, bool X_ONCE, typename Jobs>
__global__ void __launch_bounds__(kThreads, MB == 1 ? kOneRowBlocksPerMultiprocessor<CHUNK * BITS / 32> : 1)
    stream_gemv_kernel(const __grid_constant__ StreamParams p, const __grid_constant__ Jobs jobs) {
  extern __shared__ __align__(16) unsigned char stage[];  // stage_bytes: the int8 x, or a gated float input
  __shared__ float partial[kPartialFloats<MB>];
  // The next grid is placed once all these blocks exit (cuda_common.cuh).
  // X_ONCE: the block waits once its first loads of weights are issued.
  if constexpr (!X_ONCE) wait_for_previous_grid();
  if (!jobs.live(blockIdx.y)) {  // the whole block; it still waits, so that this grid ends after the one before
    if constexpr (X_ONCE) wait_for_previous_grid();
    return;
  }
  const unsigned char* area = X_ONCE ? once_area(jobs, p.xq, p.xq_stride, blockIdx.y) : nullptr;
  stream_gemv_block<BITS, CHUNK, MB, HAS_BIASES, TABLE, VEC, X_ONCE>(p, jobs.at(blockIdx.y), blockIdx.x, stage,
                                                                     partial, area);
}

static_assert(kPartialFloats<8> * sizeof(float) <= kDecodeStaticShared, "the kernel's static shared memory");

// once: x quantized once a call (p.xq, or the routed jobs' RoutedPairs::xq).
template <int BITS, int CHUNK, bool HAS_BIASES, bool TABLE, typename Jobs>
void launch_bits(const StreamParams& p, size_t smem, std::string_view who, const Jobs& jobs, int n_jobs, bool once,
                 cudaStream_t stream) {
  const int64_t cols = 4LL << p.quads_log2;
  const dim3 grid(static_cast<unsigned>((p.rows + cols - 1) / cols), static_cast<unsigned>(n_jobs));
  const bool vec = p.rows % 4 == 0;
  auto launch = [&](auto kernel) {
    prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, who, p.cols);
    launch_kernel("stream decode kernel", kernel, grid, dim3(kThreads), smem, stream, p, jobs);
  };
  // x quantized once a call (every call of several rows) or staged by each
  // block; the 3-bit body's float x neither.
  auto launch_rows = [&]<int MB>() {
    constexpr bool kOnce = int8_body(BITS);
    if constexpr (kOnce) EQ_CHECK(once || MB == 1, "GPU decode: rows of x not quantized once");
    if (kOnce && once)
      launch(vec ? stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, true, kOnce, Jobs>
                 : stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, false, kOnce, Jobs>);
    else if constexpr (MB == 1 || !int8_body(BITS))
      launch(vec ? stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, true, false, Jobs>
                 : stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, false, false, Jobs>);
  };
  if constexpr (std::is_same_v<Jobs, RoutedJobs>) {  // one row of x: no other kernel made
    launch_rows.template operator()<1>();
  } else {
    switch (rows_bucket(p.m_rows)) {
      case 1: launch_rows.template operator()<1>(); break;
      case 2: launch_rows.template operator()<2>(); break;
      case 4: launch_rows.template operator()<4>(); break;
      default: launch_rows.template operator()<8>(); break;
    }
  }
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
    // Each half's values must share a sign and fit 7 bits (code_bytes, gemv_stream.cuh): E2M1 and nl4 do.
    for (int half = 0; half < 2; ++half) {
      int sign = 0;
      for (int c = 8 * half; c < 8 * half + 8; ++c) {
        const int v = int{l.codes->int8_bytes[c]} - l.codes->int8_offset;
        EQ_CHECK(v >= -127 && v <= 127 && !(sign > 0 && v < 0) && !(sign < 0 && v > 0),
                 "GPU decode: " + std::string(format.name) + ": codes " + std::to_string(8 * half) + "-" +
                     std::to_string(8 * half + 7) + " do not hold values of one sign within +-127");
        if (v != 0) sign = v > 0 ? 1 : -1;
        p.table[c / 4] |= static_cast<uint32_t>(v < 0 ? -v : v) << (8 * (c % 4));
      }
      (half == 0 ? p.sign_lo : p.sign_hi) = sign < 0 ? -1 : 1;
    }
  }
  p.offset = 8388608.0f + static_cast<float>(l.codes->int8_offset);
  p.int_offset = l.codes->int8_offset;
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

// The scratch holds x quantized once a call (int8_input.cu) for every body but
// the 3-bit one's float x, whether quantize_once takes it or not.
size_t scratch_bytes(const FormatTraits& format, int64_t rows, int64_t cols, int n_jobs, int m_rows) {
  Body body{};
  params_of(format, rows, cols, m_rows, false, body);
  return body != Body::kAffine3 ? static_cast<size_t>(n_jobs) * int8_job_stride(layout_of(body), m_rows, cols) : 0;
}

void run_stream(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                int m_rows, void* scratch, void* stream) {
  check_call(format, m_rows, "GPU decode");
  Body body{};
  const bool gated = gated_call(format, jobs, n_jobs, m_rows, cols);
  StreamParams p = params_of(format, rows, cols, m_rows, gated, body);
  const cudaStream_t s = stream_of(stream);
  size_t stride = 0;
  const int64_t blocks_per_job = (rows + block_columns(p) - 1) / block_columns(p);
  if (body != Body::kAffine3 &&
      quantize_once(m_rows, n_jobs, blocks_per_job, one_row_blocks_per_multiprocessor(body))) {
    EQ_CHECK(scratch != nullptr, "GPU decode: " + std::string(format.name) + ": no scratch for the int8 x");
    quantize_jobs(layout_of(body), jobs, n_jobs, m_rows, cols, p.sign_lo, p.sign_hi, scratch, s);
    stride = int8_job_stride(layout_of(body), m_rows, cols);
  }
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int j0) {
    if (stride != 0) p.xq = static_cast<const unsigned char*>(scratch) + static_cast<size_t>(j0) * stride, p.xq_stride = stride;
    const size_t smem = stage_bytes(body, p);
    with_body(body, [&]<int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>() {
      launch_bits<BITS, CHUNK, HAS_BIASES, TABLE>(p, smem, format.name, batch, n, stride != 0, s);
    });
  });
}

void run_stream_routed(const FormatTraits& format, int64_t rows, int64_t cols, const RoutedPairs& pairs, int n_pairs,
                       void* stream) {
  const bool gated = gated_routed_call(format, pairs, cols);
  Body body{};
  const StreamParams p = params_of(format, rows, cols, 1, gated, body);
  const size_t smem = stage_bytes(body, p);
  const cudaStream_t s = stream_of(stream);
  RoutedPairs r = pairs;
  const int n_jobs = RoutedJobs(pairs, n_pairs).jobs;
  if (body != Body::kAffine3 && pairs.x_scratch != nullptr &&
      quantize_once(1, n_jobs, (rows + block_columns(p) - 1) / block_columns(p), one_row_blocks_per_multiprocessor(body)))
    quantize_routed(layout_of(body), r, n_pairs, cols, p.sign_lo, p.sign_hi, s);
  const RoutedJobs jobs(r, n_pairs);
  with_body(body, [&]<int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>() {
    launch_bits<BITS, CHUNK, HAS_BIASES, TABLE>(p, smem, format.name, jobs, jobs.jobs, r.xq != nullptr, s);
  });
}

// A block of the launch of several formats (gemv_mixed.cuh).
void segment_of(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated, GemvSegment& seg) {
  Body body{};
  seg.family = GemvSegment::kStream;
  seg.stream = params_of(format, rows, cols, m_rows, gated, body);
  seg.body = static_cast<int>(body);
  seg.blocks_per_job = static_cast<int>((rows + block_columns(seg.stream) - 1) / block_columns(seg.stream));
  seg.stage_bytes = stage_bytes(body, seg.stream);
}

}  // namespace

}  // namespace stream

const DeviceGemv kStreamDeviceGemv{stream::run_stream, stream::scratch_bytes, kMaxDeviceGemvRows, stream::segment_of,
                                    stream::run_stream_routed};

bool device_gemv_int8_input(const FormatTraits& format) {
  if (format.device_gemv == &kInt8RowDeviceGemv) return true;  // gemv_rowmajor.cu
  return format.device_gemv == &kStreamDeviceGemv && stream::int8_body(stream_layout_of(format).bits);
}

namespace {
// The layout and signs `format`'s products read x in (int8_row: in order).
XLayout x_layout_of(const FormatTraits& format, int64_t cols, int* sign_lo, int* sign_hi) {
  EQ_CHECK(device_gemv_int8_input(format), "GPU decode: " + std::string(format.name) + " multiplies float32 x");
  *sign_lo = *sign_hi = 1;
  if (format.device_gemv == &kInt8RowDeviceGemv) return XLayout::kNatural;
  stream::Body body{};
  const stream::StreamParams p = stream::params_of(format, 32, cols, 1, false, body);
  *sign_lo = p.sign_lo, *sign_hi = p.sign_hi;
  return stream::layout_of(body);
}
}  // namespace

size_t int8_x_bytes(const FormatTraits& format, int m_rows, int64_t cols) {
  int lo = 1, hi = 1;
  return int8_stage_bytes(x_layout_of(format, cols, &lo, &hi), m_rows, cols);
}

void quantize_x_int8(const FormatTraits& format, const float* x, int m_rows, int64_t cols, void* out) {
  int lo = 1, hi = 1;
  const XLayout layout = x_layout_of(format, cols, &lo, &hi);
  DeviceGemvJob job;
  job.x = x;
  quantize_jobs(layout, &job, 1, m_rows, cols, lo, hi, out, cudaStreamPerThread);
  check(cudaStreamSynchronize(cudaStreamPerThread), "int8 quantization of x");
}

}  // namespace eq::quant::cuda

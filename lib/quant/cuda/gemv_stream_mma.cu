// The decode product of the column bit-stream formats on the tensor cores, for
// the calls that allow it (launch_stream_mma): 4-bit codes (table or affine)
// and 8-bit affine codes, N a multiple of 4, K of 32. The CUDA-core kernel of
// gemv_stream.cu spends about 6.7 instructions a weight, one of them the FMA
// with x and two the code's conversion to float (docs/benchmarks.md, "GPU
// decode"); here two codes become a half2 in two instructions and the
// products and their sums run as FP16 MMAs (mma.sync m16n8k16, float32 sums).
//
// Exactness. A code's integer (|v| <= 255) is exact in FP16, and so is its
// product with an FP16 number (8 + 11 bits). x is scaled by a power of two s
// (the largest |x| of the call's rows to [2^14, 2^15)) and split into hi =
// fp16(s x) and lo = fp16(s x - hi); both products are summed. hi + lo is s x
// to 2^-22 of |s x| plus 2^-25 (lo's subnormal step), so an output moves by
// at most 2^-22 sum |w x| + 2^-39 max|x| sum |w| beyond the float32 sums'
// own rounding: within the envelope the CUDA-core kernel is held to
// (tests/cuda/device_gemv_test.cpp) for any x whose entries are not 2^17
// times smaller than its largest.
//
// Layout. A block is 8 warps on 32 output columns; warp w takes the 32-k
// chunks w, w + 8, ... of the window. Lane (g, t) = (lane / 4, lane % 4)
// loads the words of columns 4g .. 4g + 3 for its word row(s) of the chunk as
// 16-byte loads (the stored layout, as the CUDA-core kernel reads it), so it
// holds the codes 8t .. 8t + 7 of the chunk for 4 columns. An MMA's 16 rows
// are two of them (rows g and g + 8 are columns 4g + 2j and 4g + 2j + 1, tile
// j = 0, 1), its 8 columns the rows of x, and its k-slot pairs t and t + 4
// two half2 of the lane's codes (code_of): a permutation of the chunk's k,
// which the block applies to x as it stages it in shared memory (hi and lo
// half2 pairs in the order a lane reads them), so a lane's B fragments of a
// step are one 16-byte load. The chunk's sums are then scaled per column
// (and get bias * sum x for affine codes), and the warps' sums meet in shared
// memory in a fixed order: the result depends only on (W, x).
#include <cuda_runtime.h>

#include <cstdlib>

#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/stream_codes.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kColumns = 32;  // output columns a block: 8 lane groups x 4
constexpr int kChunk = 32;    // k a chunk: 2 MMA steps of 16
// Elements of x (rows x k) a block stages at a time: 4096 x 4 bytes (hi, lo
// halves), 16.5 KB with the row padding and chunk sums; 16 a thread, held in
// registers while the window's largest |x| is found.
constexpr int kStageElements = 4096;

// c += A B: A 16 x 16 (rows g, g + 8: a0 a2 and a1 a3; k-slot pairs t,
// t + 4: a0 a1 and a2 a3), B 16 x 8 (k-slot pairs t, t + 4 of column g), c
// rows g (c0 c1) and g + 8 (c2 c3) at columns 2t, 2t + 1.
__device__ inline void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                               uint32_t b1) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // launch_stream_mma does not launch below compute capability 8.0
#endif
}

__device__ inline uint32_t half2_bits(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }

// The lane's 8 codes of a column in the chunk as two words of code integer
// bytes, bytes[s] for step s: its pair p (k-slot pair t, or t + 4) is
// half_pair(bytes[s], p), low half j = 0. EVEN_ODD (4-bit affine codes):
// bytes[0] holds the even codes, bytes[1] the odd ones; else (4-bit through
// the table, or 8-bit codes) codes 0..3 and 4..7 in order.
template <int BITS, bool TABLE>
inline constexpr bool kEvenOdd = BITS == 4 && !TABLE;

// Which of the lane's 8 codes (k = 8t + code in the chunk) sits at step s,
// pair p, half j.
template <int BITS, bool TABLE>
__host__ __device__ constexpr int code_of(int s, int p, int j) {
  return kEvenOdd<BITS, TABLE> ? 4 * p + 2 * j + s : 4 * s + 2 * p + j;
}

template <int BITS, bool TABLE>
__device__ inline void code_bytes(const uint32_t* w, const uint32_t (&table)[4], uint32_t (&bytes)[2]) {
  if constexpr (BITS == 8) {
    bytes[0] = w[0], bytes[1] = w[1];
  } else if constexpr (TABLE) {
    bytes[0] = table_bytes(table, w[0]), bytes[1] = table_bytes(table, w[0] >> 16);
  } else {
    bytes[0] = w[0] & 0x0f0f0f0fu, bytes[1] = (w[0] >> 4) & 0x0f0f0f0fu;
  }
}

// Staged x: per row of x, per chunk, per step s, per lane t, the 16 bytes
// (hi pair 0, hi pair 1, lo pair 0, lo pair 1); rows are padded by 64 bytes
// so that two rows' 64-byte reads fall in different banks.
__host__ __device__ inline int stage_row_stride(int chunks) { return chunks * 8 + 4; }  // in uint4

// SCALE: the scales' ScaleKind; GROUP_SHIFT: log2(group / 32) for groups of
// 32 and more.
template <int BITS, bool HAS_BIASES, bool TABLE, bool G16, int SCALE>
__global__ void __launch_bounds__(kThreads, 4)
    stream_mma_kernel(const __grid_constant__ StreamParams p, const __grid_constant__ LaunchJobs jobs, int window,
                      int group_shift) {
  constexpr int kWordRows = BITS == 8 ? 2 : 1;  // word rows a lane loads a chunk
  constexpr int kWordsPerChunk = kChunk * BITS / 32;
  constexpr int kGroups = G16 ? 2 : 1;
  extern __shared__ uint4 stage[];
  __shared__ float partial[kWarps][kColumns][8];
  __shared__ float warp_max[kWarps];

  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  const uint32_t N = static_cast<uint32_t>(p.rows), K = static_cast<uint32_t>(p.cols);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const uint32_t n0 = blockIdx.x * kColumns + 4 * g;  // this lane's 4 columns (N % 4 == 0)
  const bool live = n0 < N;
  const uint32_t* qweight = static_cast<const uint32_t*>(job.parts[0]);
  const void* scales = job.parts[1];
  const uint16_t* biases = HAS_BIASES ? static_cast<const uint16_t*>(job.parts[2]) : nullptr;
  const float tensor_scale = p.has_tensor_scale ? *static_cast<const float*>(job.parts[2]) : 1.0f;
  constexpr bool kF16Scales = SCALE == static_cast<int>(ScaleKind::kF16);
  uint32_t table[4];
  for (int i = 0; i < 4; ++i) table[i] = p.table[i];
  const __half2 offset2 = __float2half2_rn(1024.0f + (p.offset - 8388608.0f));
  const int m_rows = p.m_rows;

  // A chunk's loads: the lane's words (row gc * kWordsPerChunk + t, or + 2t
  // and 2t + 1 for 8-bit codes, 4 columns each) and the raw scales (and
  // biases) of its group(s) for the 4 columns. The next chunk's are in flight
  // while a chunk is used.
  struct Loads {
    uint32_t w[4][kWordRows];
    uint2 scale[kGroups];  // 4 F16, or 4 bytes in .x
    uint2 bias;
  };
  auto load = [&](uint32_t gc, Loads& l) {
#pragma unroll
    for (int r = 0; r < kWordRows; ++r) {
      const uint32_t row = gc * kWordsPerChunk + kWordRows * t + r;
      const uint4 v4 = live ? __ldg(reinterpret_cast<const uint4*>(qweight + (row * N + n0))) : make_uint4(0, 0, 0, 0);
      l.w[0][r] = v4.x, l.w[1][r] = v4.y, l.w[2][r] = v4.z, l.w[3][r] = v4.w;
    }
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      const uint32_t grp = G16 ? 2 * gc + q : gc >> group_shift;
      const uint32_t at = grp * N + (live ? n0 : 0);
      if constexpr (kF16Scales)
        l.scale[q] = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(scales) + at));
      else
        l.scale[q] = make_uint2(__ldg(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(scales) + at)), 0);
      if constexpr (HAS_BIASES) l.bias = __ldg(reinterpret_cast<const uint2*>(biases + at));
    }
  };

  // The power of two s that takes the largest |x| of the call's rows (or of
  // their SwiGLU) to [2^14, 2^15) (1 for 0, inf or NaN): one pass over x.
  float xmax = 0.0f;
  for (int m = 0; m < m_rows; ++m)
    for (uint32_t k = tid; k < K; k += kThreads) {
      const uint32_t at = m * K + k;
      xmax = fmaxf(xmax, fabsf(job.x_up ? swiglu_device(job.x[at], job.x_up[at]) : job.x[at]));
    }
  for (int o = 16; o > 0; o >>= 1) xmax = fmaxf(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
  if (lane == 0) warp_max[warp] = xmax;
  __syncthreads();
  xmax = warp_max[0];
  for (int w = 1; w < kWarps; ++w) xmax = fmaxf(xmax, warp_max[w]);
  int e = 0;
  if (xmax > 0.0f && isfinite(xmax)) {
    frexpf(xmax, &e);
    e = min(15 - e, 126);
  }
  const float up = ldexpf(1.0f, e), unit_down = p.unit * ldexpf(1.0f, -e);

  float acc[2][4] = {};
  for (uint32_t k0 = 0; k0 < K; k0 += static_cast<uint32_t>(window)) {
    const int chunks = static_cast<int>(min(static_cast<uint32_t>(window), K - k0)) / kChunk;
    const int width = chunks * kChunk, row_stride = stage_row_stride(chunks);
    float* chunk_sums = reinterpret_cast<float*>(stage + m_rows * row_stride);  // [m_rows][chunks]
    // Every lane takes part in the MMAs; a lane past N loads nothing and stores nothing.
    Loads next{};
    if (warp < chunks) load(k0 / kChunk + warp, next);  // in flight while the window is staged
    __syncthreads();  // the previous window is read
    // Stage s x (or s SwiGLU(x, x_up)) of the window as hi and lo halves, an
    // element a thread: a warp's 32 elements are one chunk of one row, whose
    // sum (for the biases) is the warp's sum.
    for (int m = 0; m < m_rows; ++m) {
      const float* xr = job.x + m * K + k0;
      const float* ur = job.x_up ? job.x_up + m * K + k0 : nullptr;
      uint4* row = stage + m * row_stride;
      for (int r = tid; r < width; r += kThreads) {
        const float v = ur ? swiglu_device(xr[r], ur[r]) : xr[r];
        const float sv = v * up;
        const __half hi = __float2half_rn(sv), lo = __float2half_rn(sv - __half2float(hi));
        // The code's (s, p, j): code_of inverted.
        const int code = r & 7;
        const int s = kEvenOdd<BITS, TABLE> ? code & 1 : code >> 2;
        const int pp = kEvenOdd<BITS, TABLE> ? code >> 2 : (code >> 1) & 1;
        const int j = kEvenOdd<BITS, TABLE> ? (code >> 1) & 1 : code & 1;
        __half* h = reinterpret_cast<__half*>(row + (r >> 5) * 8 + s * 4 + ((r >> 3) & 3));
        h[2 * pp + j] = hi;
        h[4 + 2 * pp + j] = lo;
        if constexpr (HAS_BIASES) {
          const float sum = warp_sum(v);
          if (lane == 0) chunk_sums[m * chunks + (r >> 5)] = sum;
        }
      }
    }
    __syncthreads();
    for (int c = warp; c < chunks; c += kWarps) {
      const Loads cur = next;
      if (c + kWarps < chunks) load(k0 / kChunk + c + kWarps, next);
      // The column scales, times 1 / s.
      float sc[kGroups][4], bias[4];
#pragma unroll
      for (int q = 0; q < kGroups; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t raw = kF16Scales ? ((i < 2 ? cur.scale[q].x : cur.scale[q].y) >> (16 * (i & 1))) & 0xffffu
                                          : (cur.scale[q].x >> (8 * i)) & 0xffu;
          sc[q][i] = stream_scale_value(SCALE, raw, tensor_scale) * unit_down;
        }
      if constexpr (HAS_BIASES)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          bias[i] = __half2float(
              __ushort_as_half(static_cast<unsigned short>((i < 2 ? cur.bias.x : cur.bias.y) >> (16 * (i & 1)))));
      uint32_t bytes[4][2];
#pragma unroll
      for (int col = 0; col < 4; ++col) code_bytes<BITS, TABLE>(cur.w[col], table, bytes[col]);
      // The chunk's sums: [group][tile][c0..c3].
      // With groups of 16, lanes t = 0, 1 hold group 0's codes and t = 2, 3
      // group 1's: each group's MMAs take the other's x as zeros.
      float sum[kGroups][2][4] = {};
      const uint4* xs = stage + g * row_stride + c * 8 + t;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint4 b = make_uint4(0, 0, 0, 0);
        if (g < m_rows) b = xs[s * 4];
#pragma unroll
        for (int tile = 0; tile < 2; ++tile) {
          uint32_t a[4];  // rows g, g + 8 (columns 2 tile, 2 tile + 1), pairs 0, 1
#pragma unroll
          for (int r = 0; r < 4; ++r)
            a[r] = half2_bits(__hsub2(half_pair(bytes[2 * tile + (r & 1)][s], r >> 1), offset2));
#pragma unroll
          for (int q = 0; q < kGroups; ++q) {
            const bool mine = !G16 || (t >> 1) == q;
            mma_f16(sum[q][tile], a[0], a[1], a[2], a[3], mine ? b.x : 0u, mine ? b.y : 0u);
            mma_f16(sum[q][tile], a[0], a[1], a[2], a[3], mine ? b.z : 0u, mine ? b.w : 0u);
          }
        }
      }
      // Scale per column: c0, c1 are column 2 tile (rows 2t, 2t + 1 of x), c2, c3 column 2 tile + 1.
      float xsum[2] = {0.0f, 0.0f};
      if constexpr (HAS_BIASES)
        for (int r = 0; r < 2; ++r) xsum[r] = 2 * t + r < m_rows ? chunk_sums[(2 * t + r) * chunks + c] : 0.0f;
#pragma unroll
      for (int tile = 0; tile < 2; ++tile)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int col = 2 * tile + (r >> 1);
#pragma unroll
          for (int q = 0; q < kGroups; ++q)
            acc[tile][r] = fmaf(sc[q][col], sum[q][tile][r], acc[tile][r]);
          if constexpr (HAS_BIASES) acc[tile][r] = fmaf(bias[col], xsum[r & 1], acc[tile][r]);
        }
    }
  }
  // The warps' sums, in warp order: column 4g + 2 tile + (r >> 1), row of x 2t + (r & 1).
#pragma unroll
  for (int tile = 0; tile < 2; ++tile)
#pragma unroll
    for (int r = 0; r < 4; ++r) partial[warp][4 * g + 2 * tile + (r >> 1)][2 * t + (r & 1)] = acc[tile][r];
  __syncthreads();
  const int col = tid % kColumns, m = tid / kColumns;
  const uint32_t n = blockIdx.x * kColumns + col;
  if (m < m_rows && n < N) {
    float sum = partial[0][col][m];
    for (int w = 1; w < kWarps; ++w) sum += partial[w][col][m];
    job.y[m * N + n] = sum;
  }
}

template <int BITS, bool HAS_BIASES, bool TABLE, bool G16, int SCALE>
void launch(const StreamParams& p, const LaunchJobs& jobs, int n_jobs, cudaStream_t stream) {
  const int window = kStageElements / p.m_rows / kChunk * kChunk;
  const int chunks = static_cast<int>(std::min<int64_t>(window, p.cols)) / kChunk;
  const size_t smem = static_cast<size_t>(p.m_rows) * (sizeof(uint4) * stage_row_stride(chunks) +
                                                       (HAS_BIASES ? chunks * sizeof(float) : 0));
  int group_shift = 0;
  while ((kChunk << group_shift) < p.group) ++group_shift;
  const dim3 grid(static_cast<unsigned>((p.rows + kColumns - 1) / kColumns), static_cast<unsigned>(n_jobs));
  stream_mma_kernel<BITS, HAS_BIASES, TABLE, G16, SCALE><<<grid, kThreads, smem, stream>>>(p, jobs, window, group_shift);
}

// Compute capability 8.0 or later on the current device, and the
// measurement switch EXPERTQUANT_GPU_STREAM_MMA=0 (the CUDA-core kernel for
// every call). Read once.
bool tensor_cores_usable() {
  static const bool usable = [] {
    const char* v = std::getenv("EXPERTQUANT_GPU_STREAM_MMA");
    if (v != nullptr && v[0] == '0') return false;
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 8;
  }();
  return usable;
}

}  // namespace

bool launch_stream_mma(const StreamParams& p, int bits, bool table, bool has_biases, const LaunchJobs& jobs,
                       int n_jobs, cudaStream_t stream) {
  constexpr int kF16 = static_cast<int>(ScaleKind::kF16), kE8M0 = static_cast<int>(ScaleKind::kE8M0),
                kE4M3 = static_cast<int>(ScaleKind::kE4M3);
  const bool g16 = p.group == 16;
  if (!tensor_cores_usable() || p.rows % 4 != 0 || p.cols % kChunk != 0 || p.m_rows < 1 || p.m_rows > 8 ||
      (!g16 && (p.group % kChunk != 0 || (p.group & (p.group - 1)) != 0)))
    return false;
  // The rows' combinations (formats.md): 4-bit table codes with F16 or E8M0
  // scales in groups of 32 and more, F16 or E4M3 in groups of 16; affine
  // 4- and 8-bit codes with F16 scales.
  const int kind = p.scale_kind;
  if (bits == 4 && table && !has_biases && !g16 && kind == kF16)
    launch<4, false, true, false, kF16>(p, jobs, n_jobs, stream);
  else if (bits == 4 && table && !has_biases && !g16 && kind == kE8M0)
    launch<4, false, true, false, kE8M0>(p, jobs, n_jobs, stream);
  else if (bits == 4 && table && !has_biases && g16 && kind == kF16)
    launch<4, false, true, true, kF16>(p, jobs, n_jobs, stream);
  else if (bits == 4 && table && !has_biases && g16 && kind == kE4M3)
    launch<4, false, true, true, kE4M3>(p, jobs, n_jobs, stream);
  else if (bits == 4 && !table && has_biases && !g16 && kind == kF16)
    launch<4, true, false, false, kF16>(p, jobs, n_jobs, stream);
  else if (bits == 8 && !table && has_biases && !g16 && kind == kF16)
    launch<8, true, false, false, kF16>(p, jobs, n_jobs, stream);
  else
    return false;
  return true;
}

}  // namespace eq::quant::cuda

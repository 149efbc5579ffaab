// The bf16 product of the GPU prefill (gemm_dense.cuh) through cuBLAS,
// opened at run time on first use: a CUDA build's binaries need only the
// driver for everything else (the quantizers, the decode products), and a
// machine without cuBLAS gets one line saying what is missing.
#include <cublas_api.h>
#include <dlfcn.h>
#include <mma.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "core/env_switch.h"
#include "core/error.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/gemm_dense.cuh"

namespace eq::quant::cuda {

namespace {

// The cuBLAS entry points used here (cublas_api.h's signatures).
struct Blas {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_atomics_mode)(cublasHandle_t, cublasAtomicsMode_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

const Blas& blas() {
  static const Blas b = [] {
    Blas r;
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr)
      unsupported(std::string("GPU prefill: cuBLAS (libcublas.so.13 or .12) is not on this machine's library path: ") +
                  dlerror());
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (p == nullptr) unsupported(std::string("GPU prefill: cuBLAS has no ") + name);
      return p;
    };
    r.create = reinterpret_cast<decltype(r.create)>(sym("cublasCreate_v2"));
    r.set_stream = reinterpret_cast<decltype(r.set_stream)>(sym("cublasSetStream_v2"));
    r.set_atomics_mode = reinterpret_cast<decltype(r.set_atomics_mode)>(sym("cublasSetAtomicsMode"));
    r.gemm_ex = reinterpret_cast<decltype(r.gemm_ex)>(sym("cublasGemmEx"));
    r.status_string = reinterpret_cast<decltype(r.status_string)>(sym("cublasGetStatusString"));
    return r;
  }();
  return b;
}

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(ErrorKind::kInternal, std::string("cuBLAS: ") + what + ": " + blas().status_string(st));
}

// One handle per host thread and device (a handle is not to be shared by
// threads that set different streams on it); kept for the thread's life.
cublasHandle_t handle_of_current_device() {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  int dev = 0;
  check(cudaGetDevice(&dev), "device");
  cublasHandle_t& h = handles[dev];
  if (h == nullptr) {
    check_blas(blas().create(&h), "create handle");
    // Deterministic results: no atomics in the reductions.
    check_blas(blas().set_atomics_mode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "atomics mode");
  }
  return h;
}

// Job blockIdx.z's x rounded to bf16 into xb + z * x_stride bytes (kResidual:
// its rounding's residual, in place of the rounding already there).
template <bool kResidual>
__global__ void round_batch_kernel(const __grid_constant__ GemmBatch b, int64_t cols, __nv_bfloat16* xb,
                                   size_t x_stride) {
  const DeviceGemmJob& job = b.job[blockIdx.z];
  auto* out = reinterpret_cast<__nv_bfloat16*>(reinterpret_cast<char*>(xb) + blockIdx.z * x_stride);
  const int64_t count = job.m_rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = kResidual ? __float2bfloat16_rn(job.x[i] - __bfloat162float(out[i])) : __float2bfloat16_rn(job.x[i]);
}

// The tile product's jobs (bf16_gemms), as a kernel parameter.
struct TileJobs {
  const __nv_bfloat16* x[kGemmBatch];
  const __nv_bfloat16* w[kGemmBatch];
  float* y[kGemmBatch];
  int64_t m[kGemmBatch];
};
constexpr int kTileWarps = 4;  // warps a block: 16 rows of x by 64 columns of y

// Warp w of block (bx, by, job z) computes y_z's 16 x 16 tile at rows 16 by,
// columns 16 (4 bx + w) on the tensor cores (bf16 in, float32 sums), through
// shared memory so that rows past m_z are not stored. kColsByRows: W stored as
// W^T [K, N] row-major (a row-major B fragment), else W [N, K] (column-major).
template <bool kColsByRows>
__global__ void __launch_bounds__(32 * kTileWarps) tile_product_kernel(const __grid_constant__ TileJobs p, int64_t rows,
                                                                       int64_t cols, bool accumulate) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) float tile[kTileWarps][16 * 16];  // store_matrix_sync wants 32 bytes
  const int z = static_cast<int>(blockIdx.z);
  const int64_t m = p.m[z], m0 = static_cast<int64_t>(blockIdx.y) * 16;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kTileWarps + warp) * 16;
  if (m0 >= m || n0 >= rows) return;  // whole warps; no block barrier follows
  using BLayout = std::conditional_t<kColsByRows, wmma::row_major, wmma::col_major>;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  const __nv_bfloat16* x = p.x[z] + m0 * cols;
  const __nv_bfloat16* w = p.w[z];
#pragma unroll 4
  for (int64_t k = 0; k < cols; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BLayout> b;
    wmma::load_matrix_sync(a, x + k, static_cast<unsigned>(cols));
    if constexpr (kColsByRows) wmma::load_matrix_sync(b, w + k * rows + n0, static_cast<unsigned>(rows));
    else wmma::load_matrix_sync(b, w + n0 * cols + k, static_cast<unsigned>(cols));
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(tile[warp], acc, 16, wmma::mem_row_major);
  __syncwarp();
  float* y = p.y[z];
  for (int i = lane; i < 256; i += 32) {
    const int64_t r = m0 + i / 16, c = n0 + i % 16;
    if (r < m) y[r * rows + c] = accumulate ? y[r * rows + c] + tile[warp][i] : tile[warp][i];
  }
}

// What split_x() gives where EXPERTQUANT_GPU_SPLIT_X is unset (set_split_x_default).
std::atomic<bool> split_x_when_unset{false};

}  // namespace

bool split_x() {
  static const int set = env_switch_or_unset("EXPERTQUANT_GPU_SPLIT_X");  // read once, as every switch
  return set >= 0 ? set == 1 : split_x_when_unset.load(std::memory_order_relaxed);
}

bool set_split_x_default(bool on) { return split_x_when_unset.exchange(on); }

void bf16_gemm(const __nv_bfloat16* x, const __nv_bfloat16* w, WeightLayout layout, float* y, int64_t m,
               int64_t rows, int64_t cols, cudaStream_t s, bool accumulate) {
  if (m <= 0) return;
  EQ_CHECK(m < (int64_t{1} << 31) && rows < (int64_t{1} << 31) && cols < (int64_t{1} << 31),
           "GPU prefill: a product of [" + std::to_string(m) + ", " + std::to_string(cols) + "] x [" +
               std::to_string(cols) + ", " + std::to_string(rows) + "] is past cuBLAS's 32-bit sizes");
  cublasHandle_t h = handle_of_current_device();
  check_blas(blas().set_stream(h, s), "set stream");
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major view: y^T [rows, m] = op(W) [rows, cols] * x^T [cols, m].
  // W [rows, cols] row-major is W^T column-major (op T, ld cols); W^T
  // [cols, rows] row-major is W column-major (op N, ld rows).
  const bool kn = layout == WeightLayout::kColsByRows;
  check_blas(blas().gemm_ex(h, kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                            static_cast<int>(m), static_cast<int>(cols), &one, w, CUDA_R_16BF,
                            static_cast<int>(kn ? rows : cols), x, CUDA_R_16BF, static_cast<int>(cols), &beta, y,
                            CUDA_R_32F, static_cast<int>(rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "bf16 product");
}

void bf16_gemms(int n, const __nv_bfloat16* const* x, const __nv_bfloat16* const* w, float* const* y,
                const int64_t* m, WeightLayout layout, int64_t rows, int64_t cols, cudaStream_t s, bool accumulate) {
  // EXPERTQUANT_GPU_TILE_PRODUCT=0 sends every product to cuBLAS (for measurement). Read once.
  static const bool tile_on = env_switch("EXPERTQUANT_GPU_TILE_PRODUCT", true);
  TileJobs t;
  int tiled = 0;
  int64_t max_m = 0;
  const bool shape_ok = tile_on && rows % 16 == 0 && cols % 16 == 0;
  // wmma's loads want 32-byte aligned operands: the x slots are by
  // construction, W is when its parts are each their own allocation.
  auto aligned32 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 32 == 0; };
  for (int j = 0; j < n; ++j) {
    if (m[j] <= 0) continue;
    if (shape_ok && m[j] <= kTileRows && aligned32(w[j]) && aligned32(x[j])) {
      t.x[tiled] = x[j];
      t.w[tiled] = w[j];
      t.y[tiled] = y[j];
      t.m[tiled] = m[j];
      max_m = std::max(max_m, m[j]);
      ++tiled;
    } else {
      bf16_gemm(x[j], w[j], layout, y[j], m[j], rows, cols, s, accumulate);
    }
  }
  if (tiled == 0) return;
  const dim3 grid(static_cast<unsigned>((rows / 16 + kTileWarps - 1) / kTileWarps),
                  static_cast<unsigned>((max_m + 15) / 16), static_cast<unsigned>(tiled));
  if (layout == WeightLayout::kColsByRows)
    tile_product_kernel<true><<<grid, 32 * kTileWarps, 0, s>>>(t, rows, cols, accumulate);
  else
    tile_product_kernel<false><<<grid, 32 * kTileWarps, 0, s>>>(t, rows, cols, accumulate);
  check_launch("tile product kernel");
}

void bf16_products(const GemmBatch& b, int n, const __nv_bfloat16* const* w, WeightLayout layout, __nv_bfloat16* xb,
                   size_t x_stride, int64_t rows, int64_t cols, cudaStream_t s) {
  if (n <= 0) return;
  const int64_t max_m = max_rows(b.job, n);
  const __nv_bfloat16* x[kGemmBatch];
  float* y[kGemmBatch];
  int64_t m[kGemmBatch];
  for (int j = 0; j < n; ++j) {
    x[j] = reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(xb) + static_cast<size_t>(j) * x_stride);
    y[j] = b.job[j].y;
    m[j] = b.job[j].m_rows;
  }
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((max_m * cols + 255) / 256, 4096)), 1,
                  static_cast<unsigned>(n));
  round_batch_kernel<false><<<grid, 256, 0, s>>>(b, cols, xb, x_stride);
  check_launch("round to bf16");
  bf16_gemms(n, x, w, y, m, layout, rows, cols, s);
  if (!split_x()) return;
  round_batch_kernel<true><<<grid, 256, 0, s>>>(b, cols, xb, x_stride);  // after the products read xb
  check_launch("bf16 residual");
  bf16_gemms(n, x, w, y, m, layout, rows, cols, s, true);
}

void f32_gemm(const float* x, const float* w, float* y, int64_t m, int64_t rows, int64_t cols, cudaStream_t s,
              int64_t ldy) {
  if (m <= 0) return;
  if (ldy == 0) ldy = rows;
  EQ_CHECK(m < (int64_t{1} << 31) && ldy < (int64_t{1} << 31) && rows <= ldy && cols < (int64_t{1} << 31),
           "GPU product: [" + std::to_string(m) + ", " + std::to_string(cols) + "] x [" + std::to_string(cols) +
               ", " + std::to_string(rows) + "] is past cuBLAS's 32-bit sizes");
  cublasHandle_t h = handle_of_current_device();
  check_blas(blas().set_stream(h, s), "set stream");
  const float one = 1.0f, zero = 0.0f;
  // Column-major view as in bf16_gemm: y^T [rows, m] = W [rows, cols] (W^T column-major, op T) * x^T.
  check_blas(blas().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(m),
                            static_cast<int>(cols), &one, w, CUDA_R_32F, static_cast<int>(cols), x, CUDA_R_32F,
                            static_cast<int>(cols), &zero, y, CUDA_R_32F, static_cast<int>(ldy),
                            CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
             "float32 product");
}

}  // namespace eq::quant::cuda

// The format registry: every quantization format is one row of FormatTraits,
// the single source of truth that the CLI help, profile (sensitivity), pack
// (quantize), the manifest (names, bits) and the executor (dequantize, matmul)
// all enumerate. Adding a format = its own source file(s) under lib/quant/,
// one row in lib/quant/registry.cpp, a section in docs/formats.md
// (docs/adding-a-format.md).
//
// Conventions shared by every format:
//  * A weight matrix is W[N out, K in], row-major float32 on input (HF layout:
//    y = W x). `rows` = N, `cols` = K.
//  * quantize() produces named parts (e.g. "qweight", "scales"), always in the
//    order of FormatTraits::parts; the packer stores part p of a stacked group
//    as "<prefix>.<part>" with a leading expert dimension.
//  * The on-disk layout is canonical and ISA-independent (docs/formats.md); the
//    kernels may repack at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "quant/device.h"

namespace eq::quant {

// One stored part of a packed matrix: a non-owning view (into an mmap'd file or
// a QuantizedMatrix).
struct PartView {
  const void* data = nullptr;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
};

struct FormatTraits;
struct GemvKernel;  // lib/quant/gemv.h
struct Int8Panels;  // lib/quant/int8_panels.h
struct StreamEncoding;  // lib/quant/packed_stream.h
struct RotatedBasis;  // lib/quant/rotated_basis.h
struct DeviceGemv;  // lib/quant/cuda/cuda_gemv.h
struct DeviceGemm;  // lib/quant/cuda/cuda_gemm.h

// The declared name, dtype and shape of one stored part for a given [rows, cols].
struct PartSpec {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
};

// A packed matrix as the kernels see it: parts in FormatTraits::parts order.
struct PackedMatrix {
  const FormatTraits* format = nullptr;
  int64_t rows = 0;  // N (output features)
  int64_t cols = 0;  // K (input features)
  std::vector<PartView> parts;
};

// Owning result of quantize().
struct QuantizedMatrix {
  const FormatTraits* format = nullptr;
  int64_t rows = 0, cols = 0;
  struct Part {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Part> parts;

  PackedMatrix view() const;
  size_t nbytes() const;
};

struct QuantizeOptions {
  // Optional per-input-channel importance (length cols, >= 0), e.g. activation
  // energy sum x_k^2 over the tokens routed to this expert. The quantizer
  // minimizes sum_n sum_k importance[k] * (W - Q(W))^2. Null = uniform.
  const float* importance = nullptr;
  // Seed for formats that draw random transforms (trellis sign vectors).
  uint64_t seed = 0x5eed;
  // Name used in error messages ("model.layers.3.mlp.experts.7.up_proj.weight").
  std::string tensor_name;
  // Where to quantize (quant/device.h): kCuda runs the row's device_quantizer,
  // whose output equals the CPU quantizer's; rows without one quantize on the
  // CPU either way.
  Device device = Device::kCpu;
};

// What a stored part holds. Code that fills or reads parts without knowing
// the format (synthetic benchmark layers) goes by the role, never the name.
enum class PartRole : uint8_t {
  kCodes,        // the weights' codes (qweight, trellis) or the weights themselves
  kScales,       // one scale per group or per row
  kBiases,       // one offset per group (affine)
  kTensorScale,  // one scale for the whole matrix (nvfp4)
  kSigns,        // the +-1 sign vectors of a rotated basis (trellis su, sv)
};

struct FormatPart {
  std::string_view name;
  PartRole role;
};

struct FormatTraits {
  std::string_view name;         // stable identifier used in policies and manifests ("fp4_g32", "trellis3")
  std::string_view family;       // "fp4", "mxfp4", "nvfp4", "affine", "trellis", "int8", "bf16"
  std::string_view description;  // one line for --help and docs
  int weight_bits;               // bits of one code (4 for fp4, K for trellis, 16 for bf16)
  double bits_per_weight;        // including scales and side data, for large matrices
  int group_size;                // weights per scale group along K (0 if not applicable)
  int row_multiple;              // N must be a multiple of this
  int col_multiple;              // K must be a multiple of this
  std::vector<FormatPart> parts;  // the stored parts, in order
  // Which of its family's codes the row uses, read only by the family's own
  // files (trellis: trellis::Code, 1MAD or LUT); 0 for single-code families.
  uint8_t code = 0;

  // The format's functions. Each receives the row it is called for, so one
  // function serves every row of a family (bits, group size, layout and code
  // come from the row, never from a name).
  //
  // Quantizes W [rows, cols] row-major. Throws eq::Error naming options.tensor_name
  // and the position for NaN/Inf, and for shapes not divisible as required.
  QuantizedMatrix (*quantizer)(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
  // Reconstructs W [rows, cols] row-major (float32), in the original basis.
  void (*dequantize)(const PackedMatrix& m, float* out);
  // y[i, n] (+)= sum_k W[n, k] * x[i, k] for i < m_rows; x is [m_rows, cols],
  // y is [m_rows, rows]; accumulate=false overwrites y. Uses the best kernel
  // for the active ISA.
  void (*matmul)(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate);
  // The parts (names, dtypes, shapes) of a [rows, cols] matrix, in `parts`
  // order: what validate_packed checks and readers allocate before loading.
  std::vector<PartSpec> (*part_specs_of)(const FormatTraits& format, int64_t rows, int64_t cols);
  // The decode (few tokens) matrix-vector kernel (lib/quant/gemv.h), int8 or
  // fp32 activations as measured best for the format. Null: the executor runs
  // the format's matmul for decode too.
  const GemvKernel* gemv = nullptr;
  // The column bit-stream formats (packed_stream.h): how their codes and
  // scales are stored. Null for every other layout.
  const StreamEncoding* stream = nullptr;
  // Formats stored in a rotated basis (rotated_basis.h): how to reach the
  // unrotated codes, for kernels that rotate activations instead. Null for
  // every other format.
  const RotatedBasis* rotated = nullptr;
  // True when matmul() spreads its own work over default_pool() (callers must
  // not call it from inside a pool task: the pool is not reentrant).
  bool matmul_uses_pool = false;
  // True when quantize() costs far more than every other step (the trellis
  // Viterbi, ~1e5 weights/s per core): synthetic benchmarks fill such formats
  // with random codes instead of quantizing.
  bool slow_quantizer = false;
  // Optional (the batch expert-MLP kernel, lib/exec/batch_mlp.cpp): the block
  // W[r0:r1, c0:c1] in the original basis, as 16-row panels ready for a
  // register-blocked GEMM:
  //   out[((r - r0) / 16) * (c1 - c0) * 16 + (c - c0) * 16 + (r - r0) % 16] = W[r, c]
  // with rows past r1 in the last panel zero. Boundaries every format accepts:
  // multiples of hadamard_block_size(dim) (quant/hadamard.h) and the
  // dimension's end; stream formats (fp4, affine) also rows at multiples of 16
  // and columns at multiples of group_size, int8_row and bf16 any. Throws
  // eq::Error otherwise. Values equal dequantize()'s bit for bit.
  void (*dequantize_block)(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           float* out) = nullptr;
  // Optional (the batch kernel's integer path, lib/exec/int8_panel_gemm.h):
  // blocks of W as unsigned byte codes in vpdpbusd panels with per-(row, 32 k)
  // scales and biases (lib/quant/int8_panels.h). Null: the fp32 path above.
  const Int8Panels* int8_panels = nullptr;
  // Optional (mxfp4 only): takes a matrix that a source checkpoint already
  // stores as MXFP4, bit for bit (no requantization). blocks [rows, cols/32, 16]
  // and scales [rows, cols/32] in the release layout (byte j of a block holds
  // element 2j in its low nibble, 2j+1 in its high nibble; scale 2^(byte - 127)).
  // Throws eq::Error naming tensor_name for cols not a multiple of 32 or a
  // scale byte 0xFF (NaN, which the format never stores).
  QuantizedMatrix (*import_mxfp4)(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t cols,
                                  std::string_view tensor_name) = nullptr;
  // Optional: the same quantizer on a CUDA GPU (lib/quant/cuda/), as the
  // per-ISA kernels are the same kernel on another CPU: bit-identical output.
  // Chosen by QuantizeOptions::device; null: the CPU quantizer serves both.
  QuantizedMatrix (*device_quantizer)(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                      const QuantizeOptions& options) = nullptr;
  // Optional: the decode (few tokens, M <= kMaxDeviceGemvRows) product y = x W^T
  // on a CUDA GPU straight from the stored parts (lib/quant/cuda/cuda_gemv.h),
  // as `gemv` is the CPU's. Null: the format has no GPU kernel.
  const DeviceGemv* device_gemv = nullptr;
  // Optional: the prefill (many tokens) product y = x W^T on a CUDA GPU's
  // tensor cores, W dequantized from the stored parts into bf16 scratch
  // (lib/quant/cuda/cuda_gemm.h). Null: the format has no GPU prefill.
  const DeviceGemm* device_gemm = nullptr;

  QuantizedMatrix quantize(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options) const {
    if (options.device == Device::kCuda && device_quantizer != nullptr)
      return device_quantizer(*this, w, rows, cols, options);
    return quantizer(*this, w, rows, cols, options);
  }
  std::vector<PartSpec> part_specs(int64_t rows, int64_t cols) const { return part_specs_of(*this, rows, cols); }
  // Exact packed size in bytes of a [rows, cols] matrix (the sum of its parts).
  size_t packed_bytes(int64_t rows, int64_t cols) const;
};

// All registered formats, in a stable order (the rows of registry.cpp, then
// any row a test added).
std::span<const FormatTraits> all_formats();
// Tests only: appends `row` to all_formats() for the rest of the process, so
// the generic test suites and every look-up by name (pack, manifests, the
// executor) run it as they run the registry's rows — a row tried before it
// joins registry.cpp (docs/adding-a-format.md, "Trying a row in the tests").
// Rows already handed out never move. Not thread-safe: call it before any
// other thread reads the registry. Internal error for a name already
// registered or past 8 added rows.
const FormatTraits& add_format_for_testing(FormatTraits row);
// The row for `name`; throws eq::Error (listing valid names) when unknown.
const FormatTraits& format_by_name(std::string_view name);
// nullptr when unknown.
const FormatTraits* find_format(std::string_view name);
// Checks that `parts` match the format's declared part names, dtypes and
// shapes for [rows, cols] (FormatTraits::part_specs), that each part's nbytes
// matches its shape, and that the dimensions satisfy row/col_multiple; throws
// eq::Error naming `what`, the part and the mismatch otherwise.
void validate_packed(const PackedMatrix& m, std::string_view what);

}  // namespace eq::quant

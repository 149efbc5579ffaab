// Registry rows, dequantization and matmul of the trellis formats.
#include "quant/trellis/format.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/gemv.h"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

namespace {

// Typed pointers into the four parts, after checking them.
struct TrellisParts {
  const uint8_t* tiles;
  const int8_t* su;
  const int8_t* sv;
  const float* scales;
};

TrellisParts parts_of(const PackedMatrix& m, int bits) {
  const std::string what = "trellis" + std::to_string(bits);
  if (m.rows <= 0 || m.cols <= 0 || m.rows % kTileDim || m.cols % kTileDim)
    invalid(what + ": packed matrix has shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
            "]; both must be positive multiples of 16");
  if (m.parts.size() != 4) invalid(what + ": expected 4 parts (trellis, su, sv, scales), got " + std::to_string(m.parts.size()));
  const size_t expect[4] = {static_cast<size_t>(m.rows / kTileDim * m.cols / kTileDim * tile_bytes(bits)),
                            static_cast<size_t>(m.cols), static_cast<size_t>(m.rows), static_cast<size_t>(m.rows) * 4};
  const DType types[4] = {DType::kU8, DType::kI8, DType::kI8, DType::kF32};
  const char* names[4] = {"trellis", "su", "sv", "scales"};
  for (int i = 0; i < 4; ++i)
    if (m.parts[i].nbytes != expect[i] || m.parts[i].dtype != types[i] || !m.parts[i].data)
      invalid(what + ": part '" + names[i] + "' has " + std::to_string(m.parts[i].nbytes) + " bytes of " +
              std::string(dtype_name(m.parts[i].dtype)) + ", expected " + std::to_string(expect[i]) + " bytes of " +
              std::string(dtype_name(types[i])));
  return {static_cast<const uint8_t*>(m.parts[0].data), static_cast<const int8_t*>(m.parts[1].data),
          static_cast<const int8_t*>(m.parts[2].data), static_cast<const float*>(m.parts[3].data)};
}

// The tile decoders of a code (the per-ISA kernel table has both sets).
struct TileDecoders {
  void (*decode_tile)(const uint8_t* tile, int K, const float* row_factor, float* out, int64_t out_stride);
  void (*decode_tile_panel)(const uint8_t* tile, int K, const float* row_factor, float* out);
  void (*decode_tile_int8)(const uint8_t* tile, int K, uint8_t* out);
};

TileDecoders decoders(const Kernels& kern, Code code) {
  if (code == Code::k1mad) return {kern.decode_tile, kern.decode_tile_panel, kern.decode_tile_int8};
  return {kern.decode_tile_lut, kern.decode_tile_panel_lut, kern.decode_tile_int8_lut};
}

const uint8_t* tile_at(const TrellisParts& p, int bits, int64_t tiles_n, int64_t kt, int64_t nt) {
  return p.tiles + (kt * tiles_n + nt) * tile_bytes(bits);
}

// Decodes the tiles of sub-matrix [n0, n0 + block_n) x [k0, k0 + block_k) into
// buf (row-major, stride block_k) and applies both Hadamard transforms: the
// rotated-back values before the signs, shared by dequantize and
// dequantize_block so they stay bit-identical.
void transform_sub_matrix(const Kernels& kern, const TileDecoders& dec, const TrellisParts& p, int bits,
                          int64_t tiles_n, int64_t n0, int64_t k0, int64_t block_n, int64_t block_k, float* buf) {
  for (int64_t nt = n0 / kTileDim; nt < (n0 + block_n) / kTileDim; ++nt)
    for (int64_t kt = k0 / kTileDim; kt < (k0 + block_k) / kTileDim; ++kt)
      dec.decode_tile(tile_at(p, bits, tiles_n, kt, nt), bits, p.scales + nt * kTileDim,
                      buf + (nt * kTileDim - n0) * block_k + (kt * kTileDim - k0), block_k);
  kern.hadamard_rows(buf, block_n, block_k, block_k);
  kern.hadamard_columns(buf, block_n, block_k, block_n);
}

}  // namespace

Code code_of(const FormatTraits& f) { return static_cast<Code>(f.code); }
Code code_of(const PackedMatrix& m) { return m.format ? code_of(*m.format) : Code::k1mad; }

void dequantize_matrix(const PackedMatrix& m, int bits, float* out) {
  const TrellisParts p = parts_of(m, bits);
  const int64_t rows = m.rows, cols = m.cols, tiles_n = rows / kTileDim;
  const int64_t block_n = hadamard_block_size(rows), block_k = hadamard_block_size(cols);
  std::vector<float> su(cols);
  for (int64_t k = 0; k < cols; ++k) su[k] = p.su[k];
  // The transform is block-diagonal on both sides, so each [block_n, block_k]
  // sub-matrix (at most 128 x 128 floats = 64 KB) is independent: decode its
  // tiles into a buffer that stays in L2, transform rows and columns there and
  // write it out once with the signs applied. Working on whole 128-row strips
  // instead (1 MB at K = 2048) streamed every pass through L3 and ran 2-3x
  // slower. The arithmetic per element is unchanged (bit-identical output).
  const int64_t blocks_k = cols / block_k;
  default_pool().run(static_cast<size_t>(rows / block_n * blocks_k), [&](size_t index) {
    const Kernels& kern = kernels();
    const TileDecoders dec = decoders(kern, code_of(m));
    const int64_t n0 = static_cast<int64_t>(index) / blocks_k * block_n;
    const int64_t k0 = static_cast<int64_t>(index) % blocks_k * block_k;
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(block_n * block_k));
    transform_sub_matrix(kern, dec, p, bits, tiles_n, n0, k0, block_n, block_k, buf.data());
    for (int64_t r = 0; r < block_n; ++r) {
      const float sv = p.sv[n0 + r];
      const float* src = buf.data() + r * block_k;
      float* row = out + (n0 + r) * cols + k0;
      for (int64_t k = 0; k < block_k; ++k) row[k] = src[k] * (su[k0 + k] * sv);
    }
  });
}

void dequantize_block_matrix(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             float* out) {
  const TrellisParts p = parts_of(m, bits);
  const int64_t rows = m.rows, cols = m.cols, tiles_n = rows / kTileDim;
  const int64_t block_n = hadamard_block_size(rows), block_k = hadamard_block_size(cols), kcount = c1 - c0;
  if (r0 < 0 || r1 <= r0 || r1 > rows || c0 < 0 || c1 <= c0 || c1 > cols || r0 % block_n || r1 % block_n ||
      c0 % block_k || c1 % block_k)
    invalid("trellis" + std::to_string(bits) + ": block [" + std::to_string(r0) + ", " + std::to_string(r1) +
            ") x [" + std::to_string(c0) + ", " + std::to_string(c1) + ") not aligned to the Hadamard blocks " +
            std::to_string(block_n) + " x " + std::to_string(block_k));
  // The same per-sub-matrix steps as dequantize_matrix (bit-identical), on
  // the calling thread, written transposed into 16-row panels.
  const Kernels& kern = kernels();
  const TileDecoders dec = decoders(kern, code_of(m));
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(block_n * block_k));
  for (int64_t n0 = r0; n0 < r1; n0 += block_n)
    for (int64_t k0 = c0; k0 < c1; k0 += block_k) {
      transform_sub_matrix(kern, dec, p, bits, tiles_n, n0, k0, block_n, block_k, buf.data());
      for (int64_t r = 0; r < block_n; ++r) {
        const float sv = p.sv[n0 + r];
        const float* src = buf.data() + r * block_k;
        float* panel = out + (n0 + r - r0) / kTileDim * kTileDim * kcount + (k0 - c0) * kTileDim + (n0 + r) % kTileDim;
        for (int64_t k = 0; k < block_k; ++k)
          panel[k * kTileDim] = src[k] * (static_cast<float>(p.su[k0 + k]) * sv);
      }
    }
}

// k-tiles decode_rotated_panels prefetches ahead.
constexpr int64_t kPrefetchTiles = 4;

const float* row_scales(const PackedMatrix& m, int bits) { return parts_of(m, bits).scales; }

// Calls decode(tile, nt, kt) for every tile of the rotated block [r0, r1) x
// [c0, c1) of W', panel by panel (rows of 16) and k-tile by k-tile within a
// panel, prefetching a few k-tiles ahead: consecutive k-tiles of a panel are
// N/16 tiles apart, and the weights come from DRAM in a real layer.
template <class Decode>
void for_each_rotated_tile(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           const Decode& decode) {
  const TrellisParts p = parts_of(m, bits);
  const int64_t tiles_n = m.rows / kTileDim;
  if (r0 < 0 || r1 <= r0 || r1 > m.rows || c0 < 0 || c1 <= c0 || c1 > m.cols || r0 % kTileDim || r1 % kTileDim ||
      c0 % kTileDim || c1 % kTileDim)
    invalid("trellis" + std::to_string(bits) + ": rotated block not aligned to 16 x 16 tiles");
  for (int64_t nt = r0 / kTileDim; nt < r1 / kTileDim; ++nt)
    for (int64_t kt = c0 / kTileDim; kt < c1 / kTileDim; ++kt) {
      if (kt + kPrefetchTiles < c1 / kTileDim) {
        const char* ahead = reinterpret_cast<const char*>(tile_at(p, bits, tiles_n, kt + kPrefetchTiles, nt));
        for (int b = 0; b < tile_bytes(bits); b += 64) __builtin_prefetch(ahead + b);
      }
      decode(tile_at(p, bits, tiles_n, kt, nt), nt, kt);
    }
}

void decode_rotated_panels(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           float* out) {
  // Each tile goes straight to its 16 x 16 block of the panel (columns
  // [16kt, 16kt + 16) of the panel of rows [16nt, 16nt + 16)).
  const TileDecoders dec = decoders(kernels(), code_of(m));
  const float* scales = parts_of(m, bits).scales;
  for_each_rotated_tile(m, bits, r0, r1, c0, c1, [&](const uint8_t* tile, int64_t nt, int64_t kt) {
    dec.decode_tile_panel(tile, bits, scales + nt * kTileDim,
                          out + (nt * kTileDim - r0) * (c1 - c0) + (kt * kTileDim - c0) * kTileDim);
  });
}

void decode_rotated_int8_panels(const PackedMatrix& m, int bits, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                uint8_t* codes) {
  const TileDecoders dec = decoders(kernels(), code_of(m));
  for_each_rotated_tile(m, bits, r0, r1, c0, c1, [&](const uint8_t* tile, int64_t nt, int64_t kt) {
    dec.decode_tile_int8(tile, bits, codes + (nt * kTileDim - r0) * (c1 - c0) + (kt * kTileDim - c0) * kTileDim);
  });
}

void matmul_matrix(const PackedMatrix& m, int bits, const float* x, int64_t m_rows, float* y, bool accumulate) {
  const TrellisParts p = parts_of(m, bits);
  const int64_t rows = m.rows, cols = m.cols, tiles_n = rows / kTileDim, tiles_k = cols / kTileDim;
  if (m_rows <= 0) return;
  // y = diag(sv) H_N W' H_K diag(su) x: rotate x once, multiply by the decoded
  // rotated weights strip by strip, rotate the result back.
  std::vector<float> xr(static_cast<size_t>(m_rows * cols));
  for (int64_t i = 0; i < m_rows; ++i)
    for (int64_t k = 0; k < cols; ++k) xr[i * cols + k] = x[i * cols + k] * static_cast<float>(p.su[k]);
  hadamard_rows(xr.data(), m_rows, cols);
  std::vector<float> z(static_cast<size_t>(m_rows * rows));
  constexpr int64_t kRowBlock = 32;  // x rows per pass, so the strip and x stay in L2
  default_pool().run(static_cast<size_t>(tiles_n), [&](size_t nt_index) {
    const Kernels& kern = kernels();
    const TileDecoders dec = decoders(kern, code_of(m));
    const int64_t nt = static_cast<int64_t>(nt_index);
    thread_local std::vector<float> strip;
    strip.resize(static_cast<size_t>(kTileDim * cols));
    for (int64_t kt = 0; kt < tiles_k; ++kt)
      dec.decode_tile(tile_at(p, bits, tiles_n, kt, nt), bits, p.scales + nt * kTileDim, strip.data() + kt * kTileDim, cols);
    for (int64_t i0 = 0; i0 < m_rows; i0 += kRowBlock) {
      const int64_t count = std::min(kRowBlock, m_rows - i0);
      kern.strip_matmul(xr.data() + i0 * cols, count, cols, strip.data(), z.data() + i0 * rows + nt * kTileDim, rows);
    }
  });
  hadamard_rows(z.data(), m_rows, rows);
  for (int64_t i = 0; i < m_rows; ++i)
    for (int64_t n = 0; n < rows; ++n) {
      const float v = z[i * rows + n] * static_cast<float>(p.sv[n]);
      y[i * rows + n] = accumulate ? y[i * rows + n] + v : v;
    }
}

namespace {

QuantizedMatrix quantize_row(const FormatTraits& f, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options) {
  return quantize_matrix(w, rows, cols, options, f.weight_bits, initial_scale_ratio(f.weight_bits), code_of(f));
}
void dequantize_row(const PackedMatrix& m, float* out) { dequantize_matrix(m, m.format->weight_bits, out); }
void matmul_row(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate) {
  matmul_matrix(m, m.format->weight_bits, x, m_rows, y, accumulate);
}
std::vector<PartSpec> part_specs_row(const FormatTraits& f, int64_t rows, int64_t cols) {
  return {{"trellis", DType::kU8, {cols / kTileDim, rows / kTileDim, tile_bytes(f.weight_bits)}},
          {"su", DType::kI8, {cols}},
          {"sv", DType::kI8, {rows}},
          {"scales", DType::kF32, {rows}}};
}
void dequantize_block_row(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  dequantize_block_matrix(m, m.format->weight_bits, r0, r1, c0, c1, out);
}

FormatTraits make_traits(int bits, Code code, std::string_view name, std::string_view description) {
  return {.name = name,
          .family = "trellis",
          .description = description,
          .weight_bits = bits,
          .bits_per_weight = static_cast<double>(bits),  // + (8 + 8 + 32) bits per row/column of side data
          .group_size = 0,
          .row_multiple = kTileDim,
          .col_multiple = kTileDim,
          .parts = {{"trellis", PartRole::kCodes}, {"su", PartRole::kSigns}, {"sv", PartRole::kSigns}, {"scales", PartRole::kScales}},
          .code = static_cast<uint8_t>(code),
          .quantizer = quantize_row,
          .dequantize = dequantize_row,
          .matmul = matmul_row,
          .part_specs_of = part_specs_row,
          .gemv = &kTrellisGemv,  // lib/quant/trellis/gemv.cpp
          .rotated = &kRotatedBasis,
          .matmul_uses_pool = true,  // over 16-row tiles
          .slow_quantizer = true,
          .dequantize_block = dequantize_block_row,
          .device_quantizer = cuda::quantize_trellis,
          .device_gemv = &cuda::kTrellisDeviceGemv, .device_gemm = &cuda::kTrellisDeviceGemm};
}

}  // namespace

}  // namespace eq::quant::trellis

namespace eq::quant {

FormatTraits trellis_row(int bits, trellis::Code code) {
  using namespace trellis;
  if (code == Code::kLut) {
    switch (bits) {
      case 2: return make_traits(2, Code::kLut, "trellis2_lut", "Trellis, 2 bits: L=16 bitshift, LUT code (CPU decode), 16x16 tiles, random Hadamard");
      case 3: return make_traits(3, Code::kLut, "trellis3_lut", "Trellis, 3 bits: L=16 bitshift, LUT code (CPU decode), 16x16 tiles, random Hadamard");
      case 4: return make_traits(4, Code::kLut, "trellis4_lut", "Trellis, 4 bits: L=16 bitshift, LUT code (CPU decode), 16x16 tiles, random Hadamard");
      default: invalid("trellis: bits must be 2, 3 or 4, got " + std::to_string(bits));
    }
  }
  switch (bits) {
    case 2: return make_traits(2, Code::k1mad, "trellis2", "Trellis (QTIP-style), 2 bits: L=16 bitshift, 1MAD code, 16x16 tiles, random Hadamard");
    case 3: return make_traits(3, Code::k1mad, "trellis3", "Trellis (QTIP-style), 3 bits: L=16 bitshift, 1MAD code, 16x16 tiles, random Hadamard");
    case 4: return make_traits(4, Code::k1mad, "trellis4", "Trellis (QTIP-style), 4 bits: L=16 bitshift, 1MAD code, 16x16 tiles, random Hadamard");
    default: invalid("trellis: bits must be 2, 3 or 4, got " + std::to_string(bits));
  }
}

const FormatTraits& trellis_format(int bits, trellis::Code code) {
  using trellis::Code;
  static const FormatTraits own[2][3] = {{trellis_row(2), trellis_row(3), trellis_row(4)},
                                         {trellis_row(2, Code::kLut), trellis_row(3, Code::kLut), trellis_row(4, Code::kLut)}};
  if (bits < 2 || bits > 4) invalid("trellis: bits must be 2, 3 or 4, got " + std::to_string(bits));
  const FormatTraits& row = own[code == Code::kLut ? 1 : 0][bits - 2];
  if (const FormatTraits* registered = find_format(row.name)) return *registered;
  return row;
}

}  // namespace eq::quant

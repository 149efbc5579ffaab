// Prepares one activation row for the decode kernels (gemv.h): int8 blocks of
// 32 with an fp32 scale each, the block sums the kernels subtract or scale,
// and the reorderings the bit-stream kernels read. Plain scalar code with no
// FMA contraction, so the int8 values never depend on the ISA.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"

#include "quant/block_int8.h"
#include "quant/gemv.h"

namespace eq::quant {

void GemvActivation::set(const float* x, int64_t cols) {
  const int64_t padded = (cols + kGemvPad - 1) / kGemvPad * kGemvPad;
  const size_t p = static_cast<size_t>(padded);
  x_.assign(p, 0.0f);
  std::copy(x, x + cols, x_.begin());
  q_.assign(p, 0);
  q_nib_.resize(p);
  q_crumb_.resize(p);
  q_scale_.resize(p / kGemvBlock);
  q_sum16_.resize(p / 16);
  x_sum16_.resize(p / 16);
  q_sum4_.resize(p / 4);
  lane_scale_.resize(p / 4);

  // quant/block_int8.h: clamp then round there, round then clamp before; the
  // same bits, as |x * 127 / amax| <= 127 up to one rounding.
  const QuantizeBlockInt8Fn quantize_block = active_quantize_block_int8();
  for (int64_t b = 0; b < padded / kGemvBlock; ++b)
    quantize_block(x_.data() + b * kGemvBlock, kGemvBlock, &q_scale_[b], q_.data() + b * kGemvBlock);
  for (int64_t j = 0; j < padded / 16; ++j) {
    int32_t qs = 0;
    for (int i = 0; i < 16; ++i) qs += q_[j * 16 + i];
    q_sum16_[j] = qs;
    x_sum16_[j] = static_cast<float>(qs) * q_scale_[j * 16 / kGemvBlock];
  }
  for (int64_t j = 0; j < padded / 4; ++j) {
    q_sum4_[j] = q_[j * 4] + q_[j * 4 + 1] + q_[j * 4 + 2] + q_[j * 4 + 3];
    lane_scale_[j] = q_scale_[j * 4 / kGemvBlock];
  }
  // Stream words hold consecutive k from the low bits up; a shift s and a
  // byte mask leave code k = base + byte * per_byte + s in each byte.
  for (int64_t k = 0; k < padded; k += 8)
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < 4; ++i) q_nib_[k + 4 * s + i] = q_[k + 2 * i + s];
  for (int64_t k = 0; k < padded; k += 16)
    for (int s = 0; s < 4; ++s)
      for (int i = 0; i < 4; ++i) q_crumb_[k + 4 * s + i] = q_[k + 4 * i + s];

  in_.cols = cols;
  in_.padded_cols = padded;
  in_.x = x_.data();
  in_.q = q_.data();
  in_.q_scale = q_scale_.data();
  in_.q_sum16 = q_sum16_.data();
  in_.x_sum16 = x_sum16_.data();
  in_.q_sum4 = q_sum4_.data();
  in_.lane_scale = lane_scale_.data();
  in_.q_nib = q_nib_.data();
  in_.q_crumb = q_crumb_.data();
  in_.rep_block = 0;
  in_.q_rep4 = nullptr;
  in_.rep_scale = nullptr;
  in_.rep_sum = nullptr;
}

void GemvActivation::set_replicated(const float* x, int64_t cols, int64_t block, bool replicate) {
  if (block < 16 || block % 16 || cols % block) invalid("gemv: replicated blocks of " + std::to_string(block) +
                                                        " do not divide " + std::to_string(cols) + " columns");
  // Reuses set()'s buffers: q_ holds the 4x replicated bytes, q_scale_ and
  // q_sum4_ one scale and one sum per block. Buffers are resized, not
  // refilled: every element up to `padded` is written below (this runs once
  // per matrix and decode call; the zero fills were a third of its time).
  const int64_t padded = (cols + kGemvPad - 1) / kGemvPad * kGemvPad;
  x_.resize(static_cast<size_t>(padded));
  std::copy(x, x + cols, x_.begin());
  std::fill(x_.begin() + cols, x_.end(), 0.0f);
  q_once_.resize(static_cast<size_t>(padded));
  std::fill(q_once_.begin() + cols, q_once_.end(), int8_t{0});
  const int64_t blocks = (padded + block - 1) / block;
  q_scale_.assign(static_cast<size_t>(blocks), 0.0f);
  q_sum4_.assign(static_cast<size_t>(blocks), 0);
  // Per ISA, the same bits (quant/block_int8.h): the scalar loop ran 5 us
  // per 2048 elements, most of a trellis decode matrix's prepare step.
  const QuantizeBlockInt8Fn quantize_block = active_quantize_block_int8();
  for (int64_t b = 0; b < cols / block; ++b)
    q_sum4_[b] = quantize_block(x_.data() + b * block, block, &q_scale_[b], q_once_.data() + b * block);
  if (replicate) {
    q_.resize(static_cast<size_t>(padded * 4));
    for (int64_t k = 0; k < padded; ++k) {
      const uint32_t four = static_cast<uint32_t>(static_cast<uint8_t>(q_once_[k])) * 0x01010101u;
      std::memcpy(q_.data() + k * 4, &four, 4);
    }
  }
  in_ = GemvInput{};
  in_.cols = cols;
  in_.padded_cols = padded;
  in_.x = x_.data();
  in_.rep_block = block;
  in_.q_rep4 = replicate ? q_.data() : nullptr;
  in_.q = q_once_.data();
  in_.rep_scale = q_scale_.data();
  in_.rep_sum = q_sum4_.data();
}

const GemvInput& gemv_input_for(const GemvKernel& kernel, const PackedMatrix& m, const float* x,
                                const GemvActivation& shared, GemvActivation& own) {
  if (!kernel.prepare) return shared.input();
  kernel.prepare(m, x, own);
  return own.input();
}

}  // namespace eq::quant

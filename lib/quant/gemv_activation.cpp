// Prepares one activation row for the decode kernels (gemv.h): int8 blocks of
// 32 with an fp32 scale each, the block sums the kernels subtract or scale,
// and the reorderings the bit-stream kernels read. Plain scalar code with no
// FMA contraction, so the int8 values never depend on the ISA.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"

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

  for (int64_t b = 0; b < padded / kGemvBlock; ++b) {
    const float* xb = x_.data() + b * kGemvBlock;
    float amax = 0.0f;
    for (int i = 0; i < kGemvBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    q_scale_[b] = scale;
    for (int i = 0; i < kGemvBlock; ++i) {
      const float v = std::nearbyint(xb[i] * inv);
      q_[b * kGemvBlock + i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
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

void GemvActivation::set_replicated(const float* x, int64_t cols, int64_t block) {
  if (block < 16 || block % 16 || cols % block) invalid("gemv: replicated blocks of " + std::to_string(block) +
                                                        " do not divide " + std::to_string(cols) + " columns");
  // Reuses set()'s buffers: q_ holds the 4x replicated bytes, q_scale_ and
  // q_sum4_ one scale and one sum per block.
  const int64_t padded = (cols + kGemvPad - 1) / kGemvPad * kGemvPad;
  x_.assign(static_cast<size_t>(padded), 0.0f);
  std::copy(x, x + cols, x_.begin());
  q_.assign(static_cast<size_t>(padded * 4), 0);
  q_once_.assign(static_cast<size_t>(padded), 0);
  const int64_t blocks = (padded + block - 1) / block;
  q_scale_.assign(static_cast<size_t>(blocks), 0.0f);
  q_sum4_.assign(static_cast<size_t>(blocks), 0);
  for (int64_t b = 0; b < cols / block; ++b) {
    const float* xb = x_.data() + b * block;
    float amax = 0.0f;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    q_scale_[b] = amax / 127.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < block; ++i) {
      // nearbyint (ties to even) of a value within +-128 as the classic add
      // and subtract of 1.5 * 2^23: the same result, inlined instead of a
      // libm call per element (this step ran 10 us per 2048 elements).
      const float v = std::clamp(xb[i] * inv, -127.0f, 127.0f);
      const float r = (v + 12582912.0f) - 12582912.0f;
      const int32_t q = static_cast<int32_t>(r);
      sum += q;
      const uint32_t four = static_cast<uint32_t>(static_cast<uint8_t>(q)) * 0x01010101u;
      std::memcpy(q_.data() + (b * block + i) * 4, &four, 4);
      q_once_[b * block + i] = static_cast<int8_t>(q);
    }
    q_sum4_[b] = sum;
  }
  in_ = GemvInput{};
  in_.cols = cols;
  in_.padded_cols = padded;
  in_.x = x_.data();
  in_.rep_block = block;
  in_.q_rep4 = q_.data();
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

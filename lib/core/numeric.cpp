#include "core/numeric.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_features.h"
#include "core/error.h"

namespace eq {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exactly representable in f32
      float v = static_cast<float>(mant) * 0x1p-24f;
      bits = sign | std::bit_cast<uint32_t>(v);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (absu < 0x38800000u) {
    // Result is subnormal (or zero): quantum 2^-24. Exact RNE via float arithmetic:
    // adding 0.5 (2^-1) shifts the value so the FPU rounds at the 2^-24 position.
    const float a = std::bit_cast<float>(absu);
    const float r = a + 0.5f;  // ulp(0.5) = 2^-24
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - std::bit_cast<uint32_t>(0.5f)));
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even.
  uint32_t v = absu - ((127u - 15u) << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

namespace {

// Generic minifloat decode: 1 sign bit, `E` exponent bits, `M` mantissa bits.
float decode_minifloat(uint32_t v, int E, int M, int bias) {
  const uint32_t sign = (v >> (E + M)) & 1u;
  const uint32_t exp = (v >> M) & ((1u << E) - 1u);
  const uint32_t mant = v & ((1u << M) - 1u);
  float mag;
  if (exp == 0)
    mag = std::ldexp(static_cast<float>(mant), 1 - bias - M);
  else
    mag = std::ldexp(static_cast<float>(mant | (1u << M)), static_cast<int>(exp) - bias - M);
  return sign ? -mag : mag;
}

// Generic minifloat encode with round-to-nearest-even. `max_finite` is the
// largest finite magnitude; values that round above it go to `overflow_code`.
uint32_t encode_minifloat(float f, int E, int M, int bias, double max_finite, uint32_t overflow_code,
                          uint32_t nan_code) {
  const uint32_t sign_bit = 1u << (E + M);
  if (std::isnan(f)) return nan_code;
  const uint32_t sign = std::signbit(f) ? sign_bit : 0u;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  const int emin = 1 - bias;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): floor(log2 a) = e - 1
  int exp_unbiased = std::max(e - 1, emin);
  double quantum = std::ldexp(1.0, exp_unbiased - M);
  double q = std::nearbyint(a / quantum);  // default rounding mode: ties to even
  double v = q * quantum;
  if (v > max_finite || std::isinf(a)) return sign | overflow_code;
  if (v < std::ldexp(1.0, emin)) return sign | static_cast<uint32_t>(v / std::ldexp(1.0, emin - M));
  std::frexp(v, &e);
  exp_unbiased = e - 1;
  const uint32_t mant = static_cast<uint32_t>(v / std::ldexp(1.0, exp_unbiased - M)) - (1u << M);
  return sign | (static_cast<uint32_t>(exp_unbiased + bias) << M) | mant;
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t v) {
  if ((v & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
  return decode_minifloat(v, 4, 3, 7);
}

uint8_t f32_to_fp8_e4m3(float f, bool saturate) {
  return static_cast<uint8_t>(encode_minifloat(f, 4, 3, 7, 448.0, saturate ? 0x7eu : 0x7fu, 0x7fu));
}

float fp8_e5m2_to_f32(uint8_t v) {
  const uint32_t exp = (v >> 2) & 0x1fu;
  if (exp == 31) {
    if (v & 3u) return std::numeric_limits<float>::quiet_NaN();
    return (v & 0x80u) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return decode_minifloat(v, 5, 2, 15);
}

uint8_t f32_to_fp8_e5m2(float f, bool saturate) {
  return static_cast<uint8_t>(encode_minifloat(f, 5, 2, 15, 57344.0, saturate ? 0x7bu : 0x7cu, 0x7fu));
}

float e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

namespace kernels {
// Implemented per ISA in lib/core/kernels/{generic,avx2,avx512}/.
void bf16_to_f32_generic(const uint16_t* src, float* dst, size_t n);
void f16_to_f32_generic(const uint16_t* src, float* dst, size_t n);
void bf16_to_f32_avx2(const uint16_t* src, float* dst, size_t n);
void f16_to_f32_avx2(const uint16_t* src, float* dst, size_t n);
void bf16_to_f32_avx512(const uint16_t* src, float* dst, size_t n);
void f16_to_f32_avx512(const uint16_t* src, float* dst, size_t n);
}  // namespace kernels

namespace {
using ConvertFn = void (*)(const uint16_t*, float*, size_t);
struct ConvertTable {
  ConvertFn bf16_to_f32;
  ConvertFn f16_to_f32;
};
constexpr ConvertTable kConvertTables[] = {
    {kernels::bf16_to_f32_generic, kernels::f16_to_f32_generic},
    {kernels::bf16_to_f32_avx2, kernels::f16_to_f32_avx2},
    {kernels::bf16_to_f32_avx512, kernels::f16_to_f32_avx512},
};
// Looked up per call (cheap) so tests can switch ISA with set_active_isa_for_testing.
const ConvertTable& convert_table() { return kConvertTables[static_cast<int>(active_isa())]; }
}  // namespace

void convert_to_f32(DType type, const void* src, float* dst, size_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kBF16:
      convert_table().bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kF16:
      convert_table().f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kF64: {
      const double* s = static_cast<const double*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::kF8_E4M3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    case DType::kF8_E5M2: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e5m2_to_f32(s[i]);
      return;
    }
    case DType::kF8_E8M0: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = e8m0_to_f32(s[i]);
      return;
    }
    default:
      unsupported("convert_to_f32: dtype " + std::string(dtype_name(type)) + " is not a floating type");
  }
}

void convert_f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace eq

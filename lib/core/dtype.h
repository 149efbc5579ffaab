// Element types of stored tensors: the safetensors dtype list, exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eq {

enum class DType : uint8_t {
  kBool, kU8, kI8, kF8_E5M2, kF8_E4M3, kF8_E8M0, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64,
};

inline constexpr DType kAllDTypes[] = {
    DType::kBool, DType::kU8,  DType::kI8,  DType::kF8_E5M2, DType::kF8_E4M3, DType::kF8_E8M0,
    DType::kI16,  DType::kU16, DType::kF16, DType::kBF16,    DType::kI32,     DType::kU32,
    DType::kF32,  DType::kF64, DType::kI64, DType::kU64};

// Size of one element in bytes.
size_t dtype_size(DType t);
// The safetensors spelling ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
// Parse the safetensors spelling; nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);
// Floating types we can convert to float32 (F8s, F16, BF16, F32, F64).
bool dtype_is_float(DType t);

}  // namespace eq

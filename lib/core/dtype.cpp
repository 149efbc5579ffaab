#include "core/dtype.h"

#include <iterator>

namespace eq {

namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};
constexpr DTypeRow kRows[] = {
    {DType::kBool, "BOOL", 1, false},       {DType::kU8, "U8", 1, false},
    {DType::kI8, "I8", 1, false},           {DType::kF8_E5M2, "F8_E5M2", 1, true},
    {DType::kF8_E4M3, "F8_E4M3", 1, true},  {DType::kF8_E8M0, "F8_E8M0", 1, true},
    {DType::kI16, "I16", 2, false},         {DType::kU16, "U16", 2, false},
    {DType::kF16, "F16", 2, true},          {DType::kBF16, "BF16", 2, true},
    {DType::kI32, "I32", 4, false},         {DType::kU32, "U32", 4, false},
    {DType::kF32, "F32", 4, true},          {DType::kF64, "F64", 8, true},
    {DType::kI64, "I64", 8, false},         {DType::kU64, "U64", 8, false},
};
// row() indexes kRows by the enum value: each row must sit at its own index.
constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kRows); ++i)
    if (static_cast<size_t>(kRows[i].type) != i) return false;
  return std::size(kRows) == std::size(kAllDTypes);
}
static_assert(rows_in_enum_order(), "kRows must list every DType in enum order");
const DTypeRow& row(DType t) { return kRows[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return row(t).size; }
std::string_view dtype_name(DType t) { return row(t).name; }
bool dtype_is_float(DType t) { return row(t).is_float; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& r : kRows)
    if (r.name == name) return r.type;
  return std::nullopt;
}

}  // namespace eq

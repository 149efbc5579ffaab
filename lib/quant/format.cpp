// Registry look-ups and the format-independent checks on packed matrices.
#include "quant/format.h"

#include "quant/quantize_common.h"

#include <string>

#include "core/error.h"
#include "core/shape.h"

namespace eq::quant {

namespace {

// numel * dtype size with overflow checks; nullopt-like -1 on overflow or negative dims.
int64_t checked_nbytes(const std::vector<int64_t>& shape, DType dtype) {
  int64_t n = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

PackedMatrix QuantizedMatrix::view() const {
  PackedMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.parts.reserve(parts.size());
  for (const Part& p : parts) m.parts.push_back(PartView{p.bytes.data(), p.dtype, p.shape, p.bytes.size()});
  return m;
}

size_t QuantizedMatrix::nbytes() const {
  size_t n = 0;
  for (const Part& p : parts) n += p.bytes.size();
  return n;
}

const FormatTraits* find_format(std::string_view name) {
  for (const FormatTraits& f : all_formats())
    if (f.name == name) return &f;
  return nullptr;
}

const FormatTraits& format_by_name(std::string_view name) {
  if (const FormatTraits* f = find_format(name)) return *f;
  std::string valid;
  for (const FormatTraits& f : all_formats()) valid += (valid.empty() ? "" : ", ") + std::string(f.name);
  invalid("unknown quantization format '" + std::string(name) + "' (valid: " + valid + ")");
}

void validate_packed(const PackedMatrix& m, std::string_view what) {
  const std::string where = std::string(what);
  if (m.format == nullptr) invalid(where + ": packed matrix has no format");
  const FormatTraits& f = *m.format;
  const std::string fmt = " (format " + std::string(f.name) + ")";
  if (m.rows <= 0 || m.cols <= 0)
    invalid(where + ": shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "] is empty" + fmt);
  if (m.rows % f.row_multiple != 0 || m.cols % f.col_multiple != 0)
    invalid(where + ": shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
            "] is not a multiple of [" + std::to_string(f.row_multiple) + ", " + std::to_string(f.col_multiple) + "]" +
            fmt);
  if (m.parts.size() != f.parts.size())
    invalid(where + ": " + std::to_string(m.parts.size()) + " parts, expected " + std::to_string(f.parts.size()) + fmt);
  size_t total = 0;
  for (size_t i = 0; i < m.parts.size(); ++i) {
    const PartView& p = m.parts[i];
    const std::string part = where + "." + std::string(f.parts[i].name);
    const int64_t expect = checked_nbytes(p.shape, p.dtype);
    if (expect < 0 || static_cast<size_t>(expect) != p.nbytes)
      invalid(part + ": " + std::to_string(p.nbytes) + " bytes do not match shape " + shape_str(p.shape) + " of " +
              std::string(dtype_name(p.dtype)) + fmt);
    if (p.data == nullptr && p.nbytes != 0) invalid(part + ": no data" + fmt);
    total += p.nbytes;
  }
  const std::vector<PartSpec> specs = f.part_specs(m.rows, m.cols);
  EQ_CHECK(specs.size() == f.parts.size(), "part_specs of " + std::string(f.name) + " disagrees with parts");
  for (size_t i = 0; i < specs.size(); ++i) {
    const PartView& p = m.parts[i];
    const std::string part = where + "." + specs[i].name;
    if (p.dtype != specs[i].dtype)
      invalid(part + ": dtype " + std::string(dtype_name(p.dtype)) + ", expected " +
              std::string(dtype_name(specs[i].dtype)) + fmt);
    if (p.shape != specs[i].shape)
      invalid(part + ": shape " + shape_str(p.shape) + ", expected " + shape_str(specs[i].shape) + " for [" +
              std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]" + fmt);
  }
  if (total != f.packed_bytes(m.rows, m.cols))
    invalid(where + ": " + std::to_string(total) + " bytes in parts, expected " +
            std::to_string(f.packed_bytes(m.rows, m.cols)) + fmt);
}

size_t FormatTraits::packed_bytes(int64_t rows, int64_t cols) const {
  return specs_nbytes(part_specs(rows, cols));
}

}  // namespace eq::quant

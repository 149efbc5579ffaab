#include "quant/format_info.h"

#include "core/cpu_features.h"
#include "quant/gemv.h"
#include "quant/gemv_kernels.h"

namespace eq::quant {

FormatInfo describe_format(const FormatTraits& f) {
  FormatInfo i;
  i.name = std::string(f.name);
  i.bits_per_weight = f.bits_per_weight;
  i.description = std::string(f.description);
  if (f.rotated)
    i.block = std::to_string(f.row_multiple) + "x" + std::to_string(f.col_multiple) + " tiles, rotated basis";
  else if (f.group_size > 0)
    i.block = std::to_string(f.group_size) + " along K";
  else
    i.block = "per output row";
  if (f.row_multiple > 1 && f.col_multiple > 1)
    i.shape_rule = "rows % " + std::to_string(f.row_multiple) + ", cols % " + std::to_string(f.col_multiple);
  else if (f.col_multiple > 1)
    i.shape_rule = "cols % " + std::to_string(f.col_multiple);
  else if (f.row_multiple > 1)
    i.shape_rule = "rows % " + std::to_string(f.row_multiple);
  else
    i.shape_rule = "any";
  const std::string isa(isa_name(active_isa()));
  // A stream row whose layout the SIMD kernels do not take runs the generic one.
  const bool generic_gemv = f.gemv == &kStreamGemvInt8 &&
                            stream_gemv_int8_for(active_gemv_kernels(), f).run == kernels::gemv_stream_int8_generic;
  if (f.gemv)
    i.decode = std::string(f.gemv->int8_activation ? "gemv, int8 x" : "gemv, fp32 x") + " (" +
               (generic_gemv ? std::string(isa_name(Isa::kGeneric)) : isa) + ")";
  else
    i.decode = "matmul";
  if (f.rotated)
    i.prefill = "rotated-basis panels (" + isa + ")";
  else if (f.int8_panels)
    i.prefill = "int8 panels (" + isa + ")";
  else if (f.dequantize_block)
    i.prefill = "fp32 panels (" + isa + ")";
  else
    i.prefill = "matmul";
  return i;
}

std::vector<FormatInfo> describe_formats() {
  std::vector<FormatInfo> v;
  for (const FormatTraits& f : all_formats()) v.push_back(describe_format(f));
  return v;
}

}  // namespace eq::quant

// Golden vectors: a fixed 2x32 input, its packed parts and dequantized values
// for every non-trellis format, checked into the source (docs/formats.md
// freezes these layouts). Generated once by the quantizers, then checked by
// hand; the hand checks are spelled out in the *HandDecoded tests below.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "quant/format.h"
#include "quant/quant_kernels.h"
#include "quant_test_util.h"

namespace eq::quant {
namespace {

// Row 0: 0.5 * (the 16 E2M1 values in code order), twice (-0 at code 8 becomes
// +0); row 1: fixed "random" values.
std::vector<float> golden_input() {
  const float row1[32] = {0.49f,  -1.32f, 0.07f,  2.21f,  -0.63f, 0.95f, -0.18f, 1.44f,  -2.05f, 0.33f, 0.0f,
                          -0.81f, 1.12f,  -0.27f, 0.58f,  -1.76f, 0.84f, -0.42f, 1.97f,  0.15f,  -1.09f, 0.66f,
                          -0.03f, 1.28f,  -0.55f, 2.73f,  -1.61f, 0.21f, 0.92f,  -0.38f, 0.0f,   -0.74f};
  std::vector<float> w(64);
  for (int k = 0; k < 32; ++k) {
    w[k] = 0.5f * kE2M1Values[k % 16];
    w[32 + k] = row1[k];
  }
  return w;
}

struct GoldenPart {
  std::string name;
  std::vector<double> values;  // element values in the part's dtype (bytes for I8/U8/F8)
};
struct Golden {
  std::string format;
  std::vector<GoldenPart> parts;
  std::vector<float> dequantized;
};

const std::vector<Golden>& goldens() {
  static const std::vector<Golden> rows = {
    {"fp4_g16",
     {
      {"qweight", {0x76543210, 0x695c70e3, 0xfedcba90, 0xf3a5c02f, 0x76543210, 0x503c16a4, 0xfedcba90, 0xb0a41d7a}},
      {"scales", {0x3800, 0x356c, 0x3800, 0x3783}},
     },
     {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.508300781f, -1.35546875f, 0.0f, 2.03320312f, -0.677734375f, 1.01660156f, -0.169433594f, 1.35546875f, -2.03320312f, 0.338867188f, 0.0f, -0.677734375f, 1.01660156f, -0.338867188f, 0.508300781f, -2.03320312f, 0.938964844f, -0.469482422f, 1.87792969f, 0.234741211f, -0.938964844f, 0.704223633f, 0.0f, 1.40844727f, -0.469482422f, 2.81689453f, -1.40844727f, 0.234741211f, 0.938964844f, -0.469482422f, 0.0f, -0.704223633f}},
    {"fp4_g32",
     {
      {"qweight", {0x76543210, 0x594b60d2, 0xfedcba90, 0xe294b01e, 0x76543210, 0x503c16a3, 0xfedcba90, 0xb0a41d7a}},
      {"scales", {0x3800, 0x37bd}},
     },
     {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.483642578f, -1.45092773f, 0.0f, 1.93457031f, -0.725463867f, 0.967285156f, -0.241821289f, 1.45092773f, -1.93457031f, 0.241821289f, 0.0f, -0.725463867f, 0.967285156f, -0.241821289f, 0.483642578f, -1.93457031f, 0.725463867f, -0.483642578f, 1.93457031f, 0.241821289f, -0.967285156f, 0.725463867f, 0.0f, 1.45092773f, -0.483642578f, 2.90185547f, -1.45092773f, 0.241821289f, 0.967285156f, -0.483642578f, 0.0f, -0.725463867f}},
    {"mxfp4",
     {
      {"qweight", {0x76543210, 0x594b60d2, 0xfedcba90, 0xe294b01e, 0x76543210, 0x503c16a3, 0xfedcba90, 0xb0a41d7a}},
      {"scales", {0x7e, 0x7e}},
     },
     {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.5f, -1.5f, 0.0f, 2.0f, -0.75f, 1.0f, -0.25f, 1.5f, -2.0f, 0.25f, 0.0f, -0.75f, 1.0f, -0.25f, 0.5f, -2.0f, 0.75f, -0.5f, 2.0f, 0.25f, -1.0f, 0.75f, 0.0f, 1.5f, -0.5f, 3.0f, -1.5f, 0.25f, 1.0f, -0.5f, 0.0f, -0.75f}},
    {"nvfp4",
     {
      {"qweight", {0x76543210, 0x695c70e3, 0xfedcba90, 0xf3a5c02f, 0x76543210, 0x503c16a4, 0xfedcba90, 0xb0a41d7a}},
      {"scales", {0x78, 0x73, 0x78, 0x77}},
      {"tensor_scale", {0.001953125f}},
     },
     {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.515625f, -1.375f, 0.0f, 2.0625f, -0.6875f, 1.03125f, -0.171875f, 1.375f, -2.0625f, 0.34375f, 0.0f, -0.6875f, 1.03125f, -0.34375f, 0.515625f, -2.0625f, 0.9375f, -0.46875f, 1.875f, 0.234375f, -0.9375f, 0.703125f, 0.0f, 1.40625f, -0.46875f, 2.8125f, -1.40625f, 0.234375f, 0.9375f, -0.46875f, 0.0f, -0.703125f}},
    {"nl4_g32",
     {
      {"qweight", {0xfdcba998, 0x294b18d6, 0x13456678, 0xe593b86f, 0xfdcba998, 0x385c71a4, 0x13456678, 0xb8a47e0a}},
      {"scales", {0x43ad, 0xc131}},
     },
     {0.059967041f, 0.389785767f, 0.389785767f, 0.719604492f, 1.07940674f, 1.4691925f, 1.91894531f, 3.17825317f, 0.059967041f, -0.269851685f, -0.629653931f, -0.629653931f, -0.989456177f, -1.40922546f, -1.82899475f, -2.99835205f, 0.059967041f, 0.389785767f, 0.389785767f, 0.719604492f, 1.07940674f, 1.4691925f, 1.91894531f, 3.17825317f, 0.059967041f, -0.269851685f, -0.629653931f, -0.629653931f, -0.989456177f, -1.40922546f, -1.82899475f, -2.99835205f, 0.425857544f, -1.29785156f, -0.0405578613f, 2.02789307f, -0.730041504f, 0.953109741f, -0.263626099f, 1.58175659f, -2.14956665f, 0.425857544f, -0.0405578613f, -0.730041504f, 1.23701477f, -0.263626099f, 0.669204712f, -1.66287231f, 0.953109741f, -0.486694336f, 2.02789307f, 0.182510376f, -0.993667603f, 0.669204712f, -0.0405578613f, 1.23701477f, -0.486694336f, 2.57542419f, -1.66287231f, 0.182510376f, 0.953109741f, -0.486694336f, -0.0405578613f, -0.730041504f}},
    {"int2_g32",
     {
      {"qweight", {0x0155eaa5, 0x265499d2, 0x0155eaa5, 0x564d9876}},
      {"scales", {0x3ea3, 0x3d02}},
      {"biases", {0xc026, 0xbe10}},
     },
     {-0.415039062f, -0.415039062f, 1.24414062f, 1.24414062f, 1.24414062f, 1.24414062f, 1.24414062f, 2.90332031f, -0.415039062f, -0.415039062f, -0.415039062f, -0.415039062f, -0.415039062f, -2.07421875f, -2.07421875f, -2.07421875f, -0.415039062f, -0.415039062f, 1.24414062f, 1.24414062f, 1.24414062f, 1.24414062f, 1.24414062f, 2.90332031f, -0.415039062f, -0.415039062f, -0.415039062f, -0.415039062f, -0.415039062f, -2.07421875f, -2.07421875f, -2.07421875f, 0.98828125f, -1.515625f, -0.263671875f, 2.24023438f, -0.263671875f, 0.98828125f, -0.263671875f, 0.98828125f, -1.515625f, -0.263671875f, -0.263671875f, -0.263671875f, 0.98828125f, -0.263671875f, 0.98828125f, -1.515625f, 0.98828125f, -0.263671875f, 2.24023438f, -0.263671875f, -1.515625f, 0.98828125f, -0.263671875f, 0.98828125f, -0.263671875f, 2.24023438f, -1.515625f, -0.263671875f, 0.98828125f, -0.263671875f, -0.263671875f, -0.263671875f}},
    {"int3_g32",
     {
      {"qweight", {0xdbfad923, 0xd8ae2ccc, 0xd92304a4, 0x17941154, 0x04a4dbfa, 0x4d463aae}},
      {"scales", {0x3a53, 0x3921}},
      {"biases", {0xc13d, 0xbf58}},
     },
     {-0.247558594f, 0.54296875f, 0.54296875f, 0.54296875f, 1.33349609f, 1.33349609f, 2.12402344f, 2.91455078f, -0.247558594f, -0.247558594f, -0.247558594f, -1.03808594f, -1.03808594f, -1.82861328f, -1.82861328f, -2.61914062f, -0.247558594f, 0.54296875f, 0.54296875f, 0.54296875f, 1.33349609f, 1.33349609f, 2.12402344f, 2.91455078f, -0.247558594f, -0.247558594f, -0.247558594f, -1.03808594f, -1.03808594f, -1.82861328f, -1.82861328f, -2.61914062f, 0.728515625f, -1.19482422f, 0.0874023438f, 2.01074219f, -0.553710938f, 0.728515625f, 0.0874023438f, 1.36962891f, -1.8359375f, 0.0874023438f, 0.0874023438f, -0.553710938f, 1.36962891f, -0.553710938f, 0.728515625f, -1.8359375f, 0.728515625f, -0.553710938f, 2.01074219f, 0.0874023438f, -1.19482422f, 0.728515625f, 0.0874023438f, 1.36962891f, -0.553710938f, 2.65185547f, -1.8359375f, 0.0874023438f, 0.728515625f, -0.553710938f, 0.0874023438f, -0.553710938f}},
    {"int4_g32",
     {
      {"qweight", {0xfdcaa988, 0xb694d628, 0x03456778, 0x185a4670, 0xfdcaa988, 0xa6837c59, 0x03456778, 0x465971f5}},
      {"scales", {0x3651, 0x3525}},
      {"biases", {0xc22b, 0xc001}},
     },
     {0.07421875f, 0.07421875f, 0.468994141f, 0.863769531f, 0.863769531f, 1.65332031f, 2.0480957f, 2.83764648f, 0.07421875f, -0.320556641f, -0.320556641f, -0.715332031f, -1.11010742f, -1.50488281f, -1.8996582f, -3.08398438f, 0.07421875f, 0.07421875f, 0.468994141f, 0.863769531f, 0.863769531f, 1.65332031f, 2.0480957f, 2.83764648f, 0.07421875f, -0.320556641f, -0.320556641f, -0.715332031f, -1.11010742f, -1.50488281f, -1.8996582f, -3.08398438f, 0.5703125f, -1.35888672f, -0.0727539062f, 2.17797852f, -0.715820312f, 0.891845703f, -0.0727539062f, 1.53491211f, -2.00195312f, 0.248779297f, -0.0727539062f, -0.715820312f, 1.21337891f, -0.394287109f, 0.5703125f, -1.68041992f, 0.891845703f, -0.394287109f, 1.85644531f, 0.248779297f, -1.03735352f, 0.5703125f, -0.0727539062f, 1.21337891f, -0.394287109f, 2.82104492f, -1.68041992f, 0.248779297f, 0.891845703f, -0.394287109f, -0.0727539062f, -0.715820312f}},
    {"int8_g32",
     {
      {"qweight", {0x9e94897e, 0xe4722888, 0xfdd3bea9, 0xbb65a14d, 0x5f69747e, 0x436e8001, 0x002a3f54, 0x118d60aa, 0x9e94897e, 0x76d7589b, 0xfdd3bea9, 0xb26d9134, 0x5f69747e, 0x7919ff51, 0x002a3f54, 0x476e5a9f}},
      {"scales", {0x2610, 0x24d1}},
      {"biases", {0xc1fd, 0xc026}},
     },
     {-0.0102539062f, 0.250244141f, 0.510742188f, 0.747558594f, 1.00805664f, 1.50537109f, 2.00268555f, 2.99731445f, -0.0102539062f, -0.247070312f, -0.507568359f, -0.744384766f, -1.00488281f, -1.50219727f, -1.99951172f, -2.99414062f, -0.0102539062f, 0.250244141f, 0.510742188f, 0.747558594f, 1.00805664f, 1.50537109f, 2.00268555f, 2.99731445f, -0.0102539062f, -0.247070312f, -0.507568359f, -0.744384766f, -1.00488281f, -1.50219727f, -1.99951172f, -2.99414062f, 0.48449707f, -1.32165527f, 0.0705871582f, 2.21539307f, -0.625534058f, 0.954849243f, -0.173995972f, 1.4440155f, -2.05540466f, 0.333984375f, -0.00466918945f, -0.813674927f, 1.12417603f, -0.268066406f, 0.578567505f, -1.75437927f, 0.841964722f, -0.418579102f, 1.97080994f, 0.145843506f, -1.09588623f, 0.653823853f, -0.0234832764f, 1.27468872f, -0.55027771f, 2.72337341f, -1.60386658f, 0.202285767f, 0.917221069f, -0.380950928f, -0.00466918945f, -0.738418579f}},
    {"int8_row",
     {
      {"qweight", {0x00, 0x0b, 0x15, 0x20, 0x2a, 0x40, 0x55, 0x7f, 0x00, 0xf5, 0xeb, 0xe0, 0xd6, 0xc0, 0xab, 0x81, 0x00, 0x0b, 0x15, 0x20, 0x2a, 0x40, 0x55, 0x7f, 0x00, 0xf5, 0xeb, 0xe0, 0xd6, 0xc0, 0xab, 0x81, 0x17, 0xc3, 0x03, 0x67, 0xe3, 0x2c, 0xf8, 0x43, 0xa1, 0x0f, 0x00, 0xda, 0x34, 0xf3, 0x1b, 0xae, 0x27, 0xec, 0x5c, 0x07, 0xcd, 0x1f, 0xff, 0x3c, 0xe6, 0x7f, 0xb5, 0x0a, 0x2b, 0xee, 0x00, 0xde}},
      {"scales", {0.0235795453f, 0.0214779526f}},
     },
     {0.0f, 0.259375006f, 0.495170444f, 0.75454545f, 0.990340889f, 1.5090909f, 2.00426126f, 2.9946022f, 0.0f, -0.259375006f, -0.495170444f, -0.75454545f, -0.990340889f, -1.5090909f, -2.00426126f, -2.9946022f, 0.0f, 0.259375006f, 0.495170444f, 0.75454545f, 0.990340889f, 1.5090909f, 2.00426126f, 2.9946022f, 0.0f, -0.259375006f, -0.495170444f, -0.75454545f, -0.990340889f, -1.5090909f, -2.00426126f, -2.9946022f, 0.493992925f, -1.31015515f, 0.0644338578f, 2.21222901f, -0.62286061f, 0.945029914f, -0.171823621f, 1.43902278f, -2.04040551f, 0.322169304f, 0.0f, -0.816162229f, 1.11685348f, -0.279213369f, 0.579904735f, -1.76119208f, 0.837640166f, -0.429559052f, 1.9759717f, 0.150345668f, -1.09537554f, 0.665816545f, -0.0214779526f, 1.28867722f, -0.558426738f, 2.7277f, -1.6108464f, 0.214779526f, 0.923551977f, -0.386603147f, 0.0f, -0.730250359f}},
    {"bf16",
     {
      {"weight", {0x0000, 0x3e80, 0x3f00, 0x3f40, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x8000, 0xbe80, 0xbf00, 0xbf40, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0x0000, 0x3e80, 0x3f00, 0x3f40, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x8000, 0xbe80, 0xbf00, 0xbf40, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0x3efb, 0xbfa9, 0x3d8f, 0x400d, 0xbf21, 0x3f73, 0xbe38, 0x3fb8, 0xc003, 0x3ea9, 0x0000, 0xbf4f, 0x3f8f, 0xbe8a, 0x3f14, 0xbfe1, 0x3f57, 0xbed7, 0x3ffc, 0x3e1a, 0xbf8c, 0x3f29, 0xbcf6, 0x3fa4, 0xbf0d, 0x402f, 0xbfce, 0x3e57, 0x3f6c, 0xbec3, 0x0000, 0xbf3d}},
     },
     {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, -0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, -0.0f, -0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, 0.490234375f, -1.3203125f, 0.0698242188f, 2.203125f, -0.62890625f, 0.94921875f, -0.1796875f, 1.4375f, -2.046875f, 0.330078125f, 0.0f, -0.80859375f, 1.1171875f, -0.26953125f, 0.578125f, -1.7578125f, 0.83984375f, -0.419921875f, 1.96875f, 0.150390625f, -1.09375f, 0.66015625f, -0.0300292969f, 1.28125f, -0.55078125f, 2.734375f, -1.609375f, 0.209960938f, 0.921875f, -0.380859375f, 0.0f, -0.73828125f}},
  };
  return rows;
}

double element(const QuantizedMatrix::Part& p, size_t i) {
  switch (p.dtype) {
    case DType::kU32: { uint32_t v; std::memcpy(&v, &p.bytes[4 * i], 4); return v; }
    case DType::kF16:
    case DType::kBF16: { uint16_t v; std::memcpy(&v, &p.bytes[2 * i], 2); return v; }
    case DType::kF32: { float v; std::memcpy(&v, &p.bytes[4 * i], 4); return v; }
    default: return p.bytes[i];  // U8, I8 (as its byte), F8 codes
  }
}

std::vector<uint8_t> encode(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kU32: { const uint32_t v = static_cast<uint32_t>(values[i]); std::memcpy(&bytes[4 * i], &v, 4); break; }
      case DType::kF16:
      case DType::kBF16: { const uint16_t v = static_cast<uint16_t>(values[i]); std::memcpy(&bytes[2 * i], &v, 2); break; }
      case DType::kF32: { const float v = static_cast<float>(values[i]); std::memcpy(&bytes[4 * i], &v, 4); break; }
      default: bytes[i] = static_cast<uint8_t>(values[i]);
    }
  }
  return bytes;
}

TEST(GoldenVectors, QuantizeProducesCheckedInBytes) {
  const std::vector<float> w = golden_input();
  for (const Golden& g : goldens()) {
    SCOPED_TRACE(g.format);
    const FormatTraits& f = format_by_name(g.format);
    const QuantizedMatrix q = f.quantize(w.data(), 2, 32, QuantizeOptions{});
    ASSERT_EQ(q.parts.size(), g.parts.size());
    for (size_t p = 0; p < g.parts.size(); ++p) {
      ASSERT_EQ(q.parts[p].name, g.parts[p].name);
      const size_t count = q.parts[p].bytes.size() / dtype_size(q.parts[p].dtype);
      ASSERT_EQ(count, g.parts[p].values.size()) << g.parts[p].name;
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(element(q.parts[p], i), g.parts[p].values[i]) << g.parts[p].name << "[" << i << "]";
    }
  }
}

TEST(GoldenVectors, DequantizeCheckedInBytesGivesCheckedInValues) {
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    set_active_isa_for_testing(isa);
    for (const Golden& g : goldens()) {
      SCOPED_TRACE(g.format + " isa " + std::string(isa_name(active_isa())));
      const FormatTraits& f = format_by_name(g.format);
      const std::vector<PartSpec> specs = f.part_specs(2, 32);
      std::vector<std::vector<uint8_t>> storage;
      PackedMatrix m{&f, 2, 32, {}};
      for (size_t p = 0; p < specs.size(); ++p) {
        storage.push_back(encode(specs[p].dtype, g.parts[p].values));
        m.parts.push_back(PartView{storage.back().data(), specs[p].dtype, specs[p].shape, storage.back().size()});
      }
      validate_packed(m, "golden");
      std::vector<float> out(64);
      f.dequantize(m, out.data());
      for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], g.dequantized[i]) << "element " << i;
    }
  }
  set_active_isa_for_testing(detected_isa());
}

const Golden& golden(const std::string& name) {
  for (const Golden& g : goldens())
    if (g.format == name) return g;
  throw std::runtime_error("no golden " + name);
}

// Hand decoding of fp4_g16 (column bit stream, docs/formats.md "fp4"): row 0 is 0.5 * E2M1 values in
// code order, so with scale 0.5 (fp16 0x3800) the words are the codes
// themselves: k 0..7 -> 0x76543210, k 8..15 -> 0xFEDCBA90 (code 8 = -0 is
// written as +0). qweight is [K/8, N]: word (r, n) at index r * 2 + n.
TEST(GoldenVectors, Fp4HandDecoded) {
  const Golden& g = golden("fp4_g16");
  EXPECT_EQ(g.parts[0].values[0], 0x76543210u);  // (k 0..7, n 0)
  EXPECT_EQ(g.parts[0].values[2], 0xfedcba90u);  // (k 8..15, n 0)
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(g.parts[1].values[0])), 0.5f);
  // Row 1, group 0: scale 0x356c = 2^-2 * (1 + 364/1024) = 0.338867...; word
  // 0x695c70e3: nibble 0 = 3 (1.5), nibble 1 = 0xe (-4), nibble 2 = 0, nibble
  // 3 = 7 (6: 2.21 / s = 6.52 clips to 6).
  const float s = 0.25f * (1.0f + 364.0f / 1024.0f);
  EXPECT_EQ(g.parts[1].values[1], 0x356c);
  EXPECT_EQ(g.parts[0].values[1], 0x695c70e3u);
  EXPECT_EQ(g.dequantized[32 + 0], 1.5f * s);
  EXPECT_EQ(g.dequantized[32 + 1], -4.0f * s);
  EXPECT_EQ(g.dequantized[32 + 2], 0.0f);
  EXPECT_EQ(g.dequantized[32 + 3], 6.0f * s);
}

// mxfp4: amax 3 (row 0) and 2.73 (row 1) -> floor(log2 amax) - 2 = -1 -> byte 126, scale 0.5.
TEST(GoldenVectors, Mxfp4HandDecoded) {
  const Golden& g = golden("mxfp4");
  EXPECT_EQ(g.parts[1].values[0], 126);
  EXPECT_EQ(g.parts[1].values[1], 126);
  EXPECT_EQ(e8m0_to_f32(126), 0.5f);
  // Row 1, k = 25: 2.73 / 0.5 = 5.46 > 5 -> code 7 (6) -> 3.0. Word (k 24..31, n 1) is index 7.
  EXPECT_EQ((static_cast<uint32_t>(g.parts[0].values[7]) >> 4) & 15u, 7u);
  EXPECT_EQ(g.dequantized[32 + 25], 3.0f);
}

// nvfp4: tensor amax 3 -> tensor scale = smallest power of two >= 3 / 2688 = 2^-9.
// Block scale byte 0x78 = E4M3 0|1111|000 = 2^8 -> 256 * 2^-9 = 0.5; 0x73 =
// 0|1110|011 = 2^7 * 1.375 = 176 -> 0.34375; row 1 k 0: code 3 -> 1.5 * 0.34375.
TEST(GoldenVectors, Nvfp4HandDecoded) {
  const Golden& g = golden("nvfp4");
  EXPECT_EQ(g.parts[2].values[0], 0.001953125);
  EXPECT_EQ(g.parts[1].values[0], 0x78);
  EXPECT_EQ(g.parts[1].values[1], 0x73);
  EXPECT_EQ(fp8_e4m3_to_f32(0x73), 176.0f);
  EXPECT_EQ(g.dequantized[32 + 0], 1.5f * 0.34375f);
}

// nl4_g32: code c has value grid[c] / 128 (grid -127, -100, -78, -61, -47,
// -33, -21, -9, 2, 13, 24, 36, 49, 64, 82, 106). Row 0, k 0 (weight 0): nibble
// 0 of 0xfdcba998 = 8 (2 / 128), scale 0x43ad = 2^1 * (1 + 941/1024). Row 1
// takes a negative scale, 0xc131 = -2^1 * (1 + 305/1024), so its largest
// weight 2.73 (k 25) uses the -127 end: word (k 24..31, n 1) 0xb8a47e0a,
// nibble 1 = 0 (-127); k 0: word 0x294b18d6, nibble 0 = 6 (-21).
TEST(GoldenVectors, Nl4HandDecoded) {
  const Golden& g = golden("nl4_g32");
  const float s0 = 2.0f * (1.0f + 941.0f / 1024.0f), s1 = -2.0f * (1.0f + 305.0f / 1024.0f);
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(g.parts[1].values[0])), s0);
  EXPECT_EQ(f16_to_f32(static_cast<uint16_t>(g.parts[1].values[1])), s1);
  EXPECT_EQ(static_cast<uint32_t>(g.parts[0].values[0]) & 15u, 8u);
  EXPECT_EQ(g.dequantized[0], 2.0f / 128.0f * s0);
  EXPECT_EQ((static_cast<uint32_t>(g.parts[0].values[7]) >> 4) & 15u, 0u);
  EXPECT_EQ(g.dequantized[32 + 25], -127.0f / 128.0f * s1);
  EXPECT_EQ(static_cast<uint32_t>(g.parts[0].values[1]) & 15u, 6u);
  EXPECT_EQ(g.dequantized[32 + 0], -21.0f / 128.0f * s1);
}

// int3_g32 (3-bit stream): column 0's words are 0xdbfad923, 0xd92304a4,
// 0x04a4dbfa (indices 0, 2, 4). Element 0 = bits 0..2 = 3; element 10 =
// bits 30..32 = (word0 >> 30) | (word1 & 1) << 2 = 3; element 21 = bits
// 63..65 = (word1 >> 31) | (word2 & 3) << 1 = 5. scale 0x3a53 = 0.5 * (1 +
// 595/1024), bias 0xc13d = -2 * (1 + 317/1024); value = q * scale + bias.
TEST(GoldenVectors, Int3HandDecoded) {
  const Golden& g = golden("int3_g32");
  const uint32_t w0 = static_cast<uint32_t>(g.parts[0].values[0]), w1 = static_cast<uint32_t>(g.parts[0].values[2]),
                 w2 = static_cast<uint32_t>(g.parts[0].values[4]);
  EXPECT_EQ(w0 & 7u, 3u);
  EXPECT_EQ((w0 >> 30) | ((w1 & 1u) << 2), 3u);
  EXPECT_EQ((w1 >> 31) | ((w2 & 3u) << 1), 5u);
  const float s = 0.5f * (1.0f + 595.0f / 1024.0f), b = -2.0f * (1.0f + 317.0f / 1024.0f);
  EXPECT_EQ(g.parts[1].values[0], 0x3a53);
  EXPECT_EQ(g.parts[2].values[0], 0xc13d);
  EXPECT_EQ(g.dequantized[0], 3.0f * s + b);
  EXPECT_EQ(g.dequantized[10], 3.0f * s + b);
  EXPECT_EQ(g.dequantized[21], 5.0f * s + b);
}

// int4_g32: nibble 0 of word 0xfdcaa988 is 8; scale 0x3651 = 0.25 * (1 + 593/1024),
// bias 0xc22b = -2 * (1 + 555/1024).
TEST(GoldenVectors, Int4HandDecoded) {
  const Golden& g = golden("int4_g32");
  EXPECT_EQ(static_cast<uint32_t>(g.parts[0].values[0]) & 15u, 8u);
  EXPECT_EQ(g.dequantized[0], 8.0f * (0.25f * (1.0f + 593.0f / 1024.0f)) + -2.0f * (1.0f + 555.0f / 1024.0f));
}

// int8_row: q = round(w / scale) in [-127, 127]; the row-0 maximum 3 maps to 127 (0x7f).
TEST(GoldenVectors, Int8RowHandDecoded) {
  const Golden& g = golden("int8_row");
  EXPECT_EQ(g.parts[0].values[7], 0x7f);
  EXPECT_EQ(g.parts[0].values[15], 0x81);  // -127
  EXPECT_EQ(g.dequantized[7], 127.0f * static_cast<float>(g.parts[1].values[0]));
}

}  // namespace
}  // namespace eq::quant

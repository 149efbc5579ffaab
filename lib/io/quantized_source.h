// Quantized source checkpoints read exactly, or refused.
//
// A checkpoint released in a quantized form stores codes plus scales, not
// weights: reading an F8 tensor's codes as if they were the weights is
// silently wrong. This layer presents such a checkpoint as the model sees it:
// a quantized weight and its scales appear as ONE float tensor under the
// weight's name, dequantized exactly in float32. Supported (docs/formats.md,
// "Quantized source checkpoints"):
//  * fp8 with block scales (quant_method "fp8", weight_block_size [B0, B1]):
//    X (F8_E4M3 / F8_E5M2, [..., out, in]) and X_scale_inv (F32/BF16/F16,
//    [..., ceil(out/B0), ceil(in/B1)]); w[r, c] = fp8[r, c] * scale_inv[r/B0, c/B1].
//  * mxfp4 (quant_method "mxfp4"): P_blocks U8 [E, R, G, 16] and P_scales U8
//    [E, R, G] appear as P [E, R, G*32] (also [R, G, 16] + [R, G] -> [R, G*32]);
//    value = E2M1(nibble) * 2^(scale - 127), byte j of a block holding element
//    2j in its low nibble and 2j+1 in its high nibble.
// Every other quantization method is refused before any work, and so is every
// stored tensor whose decoding we cannot be sure of (see SourceTensors).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"

namespace eq::io {

enum class SourceQuant : uint8_t { kNone, kFp8Block, kMxfp4 };

struct SourceQuantization {
  SourceQuant method = SourceQuant::kNone;
  int64_t block_rows = 0, block_cols = 0;  // fp8: quantization_config.weight_block_size
  std::string fp8_fmt;                     // fp8: "e4m3", "e5m2", or empty when the config omits it
  // "none", "fp8 e4m3, 128x128 block scales", "mxfp4".
  std::string summary() const;
};

// config.json's "quantization_config" (absent or null -> kNone). `path` names
// config.json in errors. quant_method "fp8" needs weight_block_size = [B0, B1]
// (positive integers; absent = per-tensor fp8, unsupported) and fmt "e4m3",
// "e5m2" or absent. "mxfp4" is accepted (modules_to_not_convert is ignored:
// the tensors' dtypes say what is quantized). Any other method, or none:
// unsupported (exit 4); a malformed field: invalid (exit 2). activation_scheme
// is ignored: it concerns how an engine quantizes activations, and we read
// weights only.
SourceQuantization parse_quantization_config(const nlohmann::json& config, const std::string& path);

// The checkpoint's tensors as the model sees them (see the top of this file).
//
// Every check happens in the constructor, before any work: an F8 tensor
// without "<name>_scale_inv", an F8 tensor when the config declares no fp8
// quantization, "_blocks" without "_scales" (or the reverse), mxfp4 tensors
// without an mxfp4 config -> unsupported (exit 4); wrong scale shapes or
// dtypes, an F8 dtype that contradicts the config's fmt, a "_scale_inv" with
// no F8 weight, two tensors with one logical name -> invalid (exit 2). Every
// message names the checkpoint and the tensor(s). Values are checked while
// decoding: a NaN or Inf fp8 code, a non-finite or negative scale_inv, a 0
// scale_inv over a block with a non-zero code, an E8M0 scale byte 0xFF (NaN),
// and any decoded value that is not finite (io/finite_values.h) are refused
// naming the tensor and position, since a non-finite weight would only poison
// everything computed from it.
class SourceTensors {
 public:
  enum class Encoding : uint8_t { kPlain, kFp8Block, kMxfp4 };
  struct Info {
    std::string name;
    std::vector<int64_t> shape;   // logical shape
    DType stored = DType::kBF16;  // dtype of the stored values (F8_E4M3, U8 for mxfp4, BF16, ...)
    Encoding encoding = Encoding::kPlain;
    uint64_t stored_bytes = 0;    // bytes on disk including scales
    uint64_t numel() const;
  };

  // `ckpt` must outlive this object. Names for which `opaque` is true are
  // taken as stored, unchecked: tensors of a packed folder whose bytes only
  // their format reads (an nvfp4 group's F8 scales are not fp8 weights).
  SourceTensors(const Checkpoint& ckpt, SourceQuantization q,
                const std::function<bool(std::string_view)>& opaque = {});

  const Checkpoint& checkpoint() const { return ckpt_; }
  const SourceQuantization& quantization() const { return quant_; }
  // Logical names, sorted.
  std::vector<std::string> names() const;
  // The stored tensors a logical tensor is made of (the weight and its
  // scales, blocks and scales, or the tensor itself), for copying as stored.
  std::vector<std::string> stored_names(std::string_view name) const;
  bool has(std::string_view name) const;
  // Throws eq::Error naming the checkpoint and tensor when absent.
  const Info& info(std::string_view name) const;

  // The whole logical tensor as float32 into dst[numel]. Plain float dtypes
  // convert as TensorView::to_f32 does; a plain non-float dtype is an error
  // naming it. The mapped pages are released afterwards, so streaming a
  // checkpoint never holds much more than one tensor.
  void to_f32(std::string_view name, float* dst) const;
  std::vector<float> load_f32(std::string_view name) const;
  // Stored bytes converted so far by to_f32 and slice_to_f32 (a tensor read
  // twice counts twice): the checkpoint read rate that passes report.
  uint64_t bytes_converted() const { return bytes_converted_.load(std::memory_order_relaxed); }
  // Called with the logical name after each to_f32 and slice_to_f32, from
  // the converting thread (io/hashes_as_read.h); null for none. Set it while
  // no conversion runs.
  void set_conversion_observer(std::function<void(std::string_view)> observer) const {
    observer_ = std::move(observer);
  }
  // Slice `index` along dim 0 of a logical tensor of rank >= 3 (a stacked
  // [E, R, C] expert tensor) as float32 [R*C]; releases that slice's pages.
  void slice_to_f32(std::string_view name, int64_t index, float* dst) const;

  // Checks the values of the logical tensor stored as `stored` (its weight,
  // F8 codes or mxfp4 blocks) by the rule of io/finite_values.h, decoding a
  // bounded piece at a time, for a tensor copied as stored and never
  // converted (a pack's copies). A scale tensor is checked with its weight,
  // and a name that is not a float weight passes.
  void check_finite(std::string_view stored) const;

  // Raw release-layout bytes of one matrix of an MXFP4 tensor: blocks
  // [R, G, 16] and scales [R, G], rows = R, cols = G*32. For [E, R, G*32],
  // `index` picks the expert; for a 2-D [R, G*32] tensor `index` must be 0.
  // Input for FormatTraits::import_mxfp4 (lossless to the mxfp4 format).
  struct Mxfp4Slice {
    std::span<const uint8_t> blocks, scales;
    int64_t rows = 0, cols = 0;
  };
  Mxfp4Slice mxfp4_slice(std::string_view name, int64_t index) const;

 private:
  struct Entry {
    Info info;
    const TensorInfo* data = nullptr;   // the weight (plain, F8 codes) or P_blocks
    const TensorInfo* scale = nullptr;  // X_scale_inv or P_scales
  };
  const Entry& entry(std::string_view name) const;
  void decode_fp8(const Entry& e, int64_t first, int64_t count, float* dst) const;
  void decode_mxfp4(const Entry& e, int64_t first_row, int64_t rows, float* dst) const;
  void release(const TensorInfo& t, uint64_t offset, uint64_t length) const;
  void require_float(const Entry& e) const;

  const Checkpoint& ckpt_;
  SourceQuantization quant_;
  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, std::string, std::less<>> logical_of_data_;  // stored weight -> logical name
  mutable std::atomic<uint64_t> bytes_converted_{0};
  mutable std::function<void(std::string_view)> observer_;
};

}  // namespace eq::io

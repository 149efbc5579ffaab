// The checkpoint a profile describes, as profile.json's "model" object records
// it: pack compares it with the checkpoint it packs, `profile --merge` the
// fingerprints of its parts.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "io/tensor_hashes.h"

namespace eq::io {
class Checkpoint;
}

namespace eq::plan {

struct ModelFingerprint {
  std::string path, model_type;
  // io/checkpoint_fingerprint.h, in hex: config.json bytes; sorted "name dtype shape" lines.
  std::string config_xxh64, tensor_index_xxh64;
  int64_t num_layers = 0;
  // Every stored tensor: sample and full data hashes (io/tensor_hashes.h).
  io::TensorHashes tensors;
};

// config.json, the tensor index and every tensor's sample hash: a few pages
// per tensor (what `pack --profile` compares before packing).
ModelFingerprint fingerprint_metadata(const io::Checkpoint& ckpt, const std::string& model_path);
// The same plus every tensor's full hash: one streaming read of the
// checkpoint, whose pages the calibration pass then finds in the page cache.
ModelFingerprint fingerprint_model(const std::string& model_path);

// The first difference between the checkpoints two fingerprints describe
// ("config.json", "tensor index", or "tensor 'X' (...)"), naming `a_label`
// and `b_label`; empty when they describe the same data.
std::string fingerprint_difference(const ModelFingerprint& a, const std::string& a_label, const ModelFingerprint& b,
                                   const std::string& b_label);

// The fingerprint's fields of profile.json's "model" object (the profile adds
// the statistics' dims after them).
nlohmann::ordered_json fingerprint_to_json(const ModelFingerprint& f);
// profile.json's "model" object (`j` is the whole profile); errors name `label` and the field.
ModelFingerprint parse_fingerprint(const nlohmann::json& j, const std::string& label);

}  // namespace eq::plan

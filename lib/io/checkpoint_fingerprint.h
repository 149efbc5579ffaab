// What identifies a checkpoint without reading its tensor data: config.json's
// bytes and the tensor index (names, dtypes, shapes). Two files record it, each
// in the encoding it has had since its first version, so both are computed here
// in one walk of the index: profile.json keeps the two parts apart (and says
// which differs), manifest.json one number for both. Data hashes:
// io/tensor_hashes.h.
#pragma once

#include <cstdint>

namespace eq::io {

class Checkpoint;

struct MetadataFingerprint {
  // profile.json "model.config_xxh64": XXH64 of config.json's bytes.
  uint64_t config_xxh64 = 0;
  // profile.json "model.tensor_index_xxh64": XXH64 of one "name dtype-id dim dim...\n"
  // line per tensor, by name.
  uint64_t tensor_index_xxh64 = 0;
  // manifest.json "source.fingerprint": XXH64 of config.json's bytes followed by
  // one "name|dtype|dim,dim,...,|bytes\n" line per tensor, by name.
  uint64_t source_xxh64 = 0;
};

// Reads config.json beside the checkpoint (at most `max_config_bytes`) and its
// tensor index; costs nothing on a 400B checkpoint.
MetadataFingerprint fingerprint_metadata(const Checkpoint& ckpt, uint64_t max_config_bytes);

}  // namespace eq::io

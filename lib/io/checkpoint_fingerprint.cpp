#include "io/checkpoint_fingerprint.h"

#include <string>

#include "core/dtype.h"
#include "core/hash.h"
#include "io/safetensors.h"
#include "io/text_file.h"

namespace eq::io {

MetadataFingerprint fingerprint_metadata(const Checkpoint& ckpt, uint64_t max_config_bytes) {
  const std::string config = read_file_bytes(ckpt.folder() + "/config.json", max_config_bytes);
  Xxhash64 index, source;
  source.update(config.data(), config.size());
  for (const auto& name : ckpt.tensor_names()) {
    const TensorInfo& t = ckpt.info(name);
    std::string index_line = name + " " + std::to_string(int(t.dtype));
    std::string source_line = name + "|" + std::string(dtype_name(t.dtype)) + "|";
    for (int64_t d : t.shape) {
      index_line += " " + std::to_string(d);
      source_line += std::to_string(d) + ",";
    }
    index_line += "\n";
    source_line += "|" + std::to_string(t.nbytes()) + "\n";
    index.update(index_line.data(), index_line.size());
    source.update(source_line.data(), source_line.size());
  }
  return {xxhash64(config), index.digest(), source.digest()};
}

}  // namespace eq::io

#include "plan/fingerprint.h"

#include <memory>

#include "core/error.h"
#include "core/hash.h"
#include "io/checkpoint_fingerprint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/open_checkpoint.h"

namespace eq::plan {

using nlohmann::json;

ModelFingerprint fingerprint_metadata(const io::Checkpoint& ckpt, const std::string& model_path) {
  const io::MetadataFingerprint m = io::fingerprint_metadata(ckpt, model::kMaxConfigBytes);
  ModelFingerprint f;
  f.path = model_path;
  f.config_xxh64 = hash_hex(m.config_xxh64);
  f.tensor_index_xxh64 = hash_hex(m.tensor_index_xxh64);
  const model::ModelConfig c = model::load_config(ckpt.folder());
  f.model_type = c.model_type;
  f.num_layers = c.num_layers;
  f.tensors = io::sample_tensor_hashes(ckpt);
  return f;
}

ModelFingerprint fingerprint_model(const std::string& model_path) {
  const model::ModelCheckpoint opened = model::open_checkpoint(model_path);  // the names pack sees
  ModelFingerprint f = fingerprint_metadata(*opened.checkpoint, model_path);
  io::add_full_hashes(*opened.checkpoint, f.tensors);
  return f;
}

std::string fingerprint_difference(const ModelFingerprint& a, const std::string& a_label, const ModelFingerprint& b,
                                   const std::string& b_label) {
  const std::string both = " differs between " + a_label + " and " + b_label;
  if (a.model_type != b.model_type)
    return "model_type" + both + " ('" + a.model_type + "' vs '" + b.model_type + "')";
  if (a.config_xxh64 != b.config_xxh64)
    return "config.json" + both + " (xxh64 " + a.config_xxh64 + " vs " + b.config_xxh64 + ")";
  if (a.tensor_index_xxh64 != b.tensor_index_xxh64)
    return "the tensor index (names, dtypes, shapes)" + both;
  if (const auto d = io::first_difference(a.tensors, b.tensors))
    return "tensor '" + d->tensor + "'" + both + " (" + d->a + " vs " + d->b + ")";
  return {};
}

nlohmann::ordered_json fingerprint_to_json(const ModelFingerprint& f) {
  return {{"path", f.path},
          {"model_type", f.model_type},
          {"config_xxh64", f.config_xxh64},
          {"tensor_index_xxh64", f.tensor_index_xxh64},
          {"num_layers", f.num_layers},
          {"tensors", io::tensor_hashes_to_json(f.tensors)}};
}

ModelFingerprint parse_fingerprint(const json& j, const std::string& label) {
  if (!j.is_object() || !j.contains("model")) invalid(label + ": field 'model': missing");
  const json& m = j["model"];
  const auto need = [&](const char* key) -> const json& {
    if (!m.is_object() || !m.contains(key)) invalid(label + ": field 'model." + key + "': missing");
    return m[key];
  };
  auto str = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_string()) invalid(label + ": field 'model." + key + "': not a string");
    return v.get<std::string>();
  };
  ModelFingerprint f;
  if (m.contains("path") && m["path"].is_string()) f.path = m["path"].get<std::string>();
  f.model_type = str("model_type");
  f.config_xxh64 = str("config_xxh64");
  f.tensor_index_xxh64 = str("tensor_index_xxh64");
  const json& nl = need("num_layers");
  if (!nl.is_number_integer()) invalid(label + ": field 'model.num_layers': not an integer");
  f.num_layers = nl.get<int64_t>();
  f.tensors = io::parse_tensor_hashes(need("tensors"), label, "model.tensors");
  return f;
}

}  // namespace eq::plan

#include "pack/summary.h"

#include <filesystem>
#include <map>

#include "pack/manifest.h"
#include "quant/format.h"

namespace eq::pack {

namespace {

using nlohmann::ordered_json;

ordered_json class_counts_json(const std::array<int64_t, plan::kNumClasses>& counts) {
  ordered_json j;
  for (int k = 0; k < plan::kNumClasses; ++k) j[std::string(plan::class_name(plan::ExpertClass(k)))] = counts[k];
  return j;
}

// Bits per weight of the experts of one format, or of all kept experts:
// total = stored bits / weights; payload = the codes alone (the format's
// bits per code); overhead = the rest (scales, side data).
struct BitTally {
  uint64_t weights = 0, bytes = 0;
  double code_bits = 0;  // sum of weights x bits per code
  void add(uint64_t w, uint64_t b, int weight_bits) {
    weights += w;
    bytes += b;
    code_bits += double(w) * weight_bits;
  }
  double total() const { return weights ? 8.0 * double(bytes) / double(weights) : 0.0; }
  double payload() const { return weights ? code_bits / double(weights) : 0.0; }
  ordered_json json() const {
    return {{"total", total()}, {"payload", payload()}, {"overhead", total() - payload()}};
  }
};

struct FormatTally {
  int64_t experts = 0, groups = 0;
  BitTally bits;
};

uint64_t weights_per_expert(const ManifestLayer& l) {
  return l.experts.empty() ? 0 : l.counts.expert_weights / uint64_t(l.experts.size());
}

ordered_json layer_summary(const ManifestLayer& l, std::map<std::string, FormatTally>& formats, BitTally& kept) {
  ordered_json lj;
  lj["layer"] = l.layer;
  lj["moe"] = l.moe;
  lj["class_counts"] = class_counts_json(l.counts.class_counts);
  ordered_json groups = ordered_json::array();
  for (const auto& g : l.groups) {
    groups.push_back({{"id", g.id}, {"format", g.format}, {"experts", g.expert_ids.size()}});
    ++formats[g.format].groups;
  }
  lj["groups"] = groups;
  const uint64_t w = weights_per_expert(l);
  std::map<std::string, int64_t> per_format;
  BitTally layer_kept;
  for (const auto& e : l.experts) {
    if (e.cls == plan::ExpertClass::kPruned) continue;
    const int code_bits = quant::format_by_name(e.format).weight_bits;
    ++per_format[e.format];
    ++formats[e.format].experts;
    formats[e.format].bits.add(w, e.bytes_after, code_bits);
    layer_kept.add(w, e.bytes_after, code_bits);
    kept.add(w, e.bytes_after, code_bits);
  }
  ordered_json fj = ordered_json::object();
  for (const auto& [name, n] : per_format) fj[name] = n;
  lj["formats"] = fj;
  lj["bits_per_weight"] = layer_kept.json();
  lj["avg_bits_per_expert_weight"] = l.counts.avg_bits_per_expert_weight();
  lj["bytes_before"] = l.counts.bytes_before;
  lj["bytes_after"] = l.counts.bytes_after;
  return lj;
}

uint64_t file_size_or_zero(const std::filesystem::path& p) {
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(p, ec);
  return ec ? 0 : uint64_t(n);
}

}  // namespace

bool is_packed(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / kManifestFile, ec);
  return fs::path(path).filename() == kManifestFile;
}

nlohmann::ordered_json summarize_packed(const std::string& path) {
  namespace fs = std::filesystem;
  const Manifest m = load_manifest(path);
  const fs::path manifest_path = fs::is_directory(path) ? fs::path(path) / kManifestFile : fs::path(path);

  ordered_json j;
  j["path"] = path;
  j["kind"] = "packed";
  j["tool_version"] = m.tool_version;
  j["model_type"] = m.source.model_type;
  j["dims"] = {{"layers", m.source.num_layers},
               {"experts", m.source.num_experts},
               {"hidden_size", m.source.hidden_size},
               {"moe_intermediate_size", m.source.moe_intermediate_size}};
  j["source"] = m.source.path;
  if (m.source.mtp_tensors_dropped > 0) j["mtp_tensors_dropped"] = m.source.mtp_tensors_dropped;
  ordered_json pol;
  pol["kind"] = m.policy.kind;
  if (!m.policy.uniform_format.empty()) pol["uniform_format"] = m.policy.uniform_format;
  pol["attn_format"] = m.policy.attn_format.empty() ? ordered_json(nullptr) : ordered_json(m.policy.attn_format);
  pol["shared_format"] = m.policy.shared_format.empty() ? ordered_json(nullptr) : ordered_json(m.policy.shared_format);
  pol["dense_format"] = m.policy.dense_format.empty() ? ordered_json(nullptr) : ordered_json(m.policy.dense_format);
  j["policy"] = pol;
  j["layer_range"] = {{"first", m.first_layer}, {"last", m.last_layer}};
  j["complete"] = m.complete;

  std::map<std::string, FormatTally> formats;
  BitTally kept;
  ordered_json layers = ordered_json::array();
  size_t groups = 0;
  for (const auto& l : m.layers) {
    layers.push_back(layer_summary(l, formats, kept));
    groups += l.groups.size();
  }
  j["class_counts"] = class_counts_json(m.totals.class_counts);
  j["groups"] = groups;
  ordered_json fj = ordered_json::array();
  for (const auto& [name, f] : formats)
    fj.push_back({{"format", name},
                  {"experts", f.experts},
                  {"groups", f.groups},
                  {"bytes", f.bits.bytes},
                  {"bits_per_weight", f.bits.json()}});
  j["formats"] = fj;
  // Kept experts only; avg_bits_per_expert_weight counts pruned ones as 0 bits.
  j["bits_per_weight"] = kept.json();
  j["avg_bits_per_expert_weight"] = m.totals.avg_bits_per_expert_weight();

  uint64_t side_files = 0;
  for (const auto& f : m.files) side_files += f.bytes;
  const uint64_t manifest_bytes = file_size_or_zero(manifest_path);
  j["sizes"] = {{"on_disk_bytes", m.file_bytes + side_files + manifest_bytes},
                {"shard_bytes", m.file_bytes},
                {"side_file_bytes", side_files},
                {"manifest_bytes", manifest_bytes},
                {"tensor_bytes", m.totals.bytes_after},
                {"source_tensor_bytes", m.totals.bytes_before},
                {"expert_bytes", m.totals.expert_bytes_after},
                {"source_expert_bytes", m.totals.expert_bytes_before}};
  j["layers"] = layers;
  return j;
}

}  // namespace eq::pack

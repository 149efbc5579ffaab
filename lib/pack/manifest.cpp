#include "pack/manifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/hash.h"
#include "io/input_file.h"
#include "io/json_checksum.h"
#include "io/json_guard.h"
#include "io/json_node.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "quant/format.h"
#include "core/shape.h"

namespace eq::pack {

using nlohmann::json;
using nlohmann::ordered_json;

std::string ManifestGroup::tensor(int proj, const std::string& part) const {
  return prefix + "." + std::string(kProjNames[proj]) + "." + part;
}

double ByteCounts::avg_bits_per_expert_weight() const {
  return expert_weights ? 8.0 * double(expert_bytes_after) / double(expert_weights) : 0.0;
}

std::string shard_file_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index + 1, count);
  return buf;
}

std::span<const char* const> side_file_names() {
  static const char* const kNames[] = {"generation_config.json", "tokenizer.json",          "tokenizer.json.zst",
                                       "tokenizer_config.json",  "tokenizer.model",         "special_tokens_map.json",
                                       "vocab.json",             "merges.txt",              "added_tokens.json",
                                       "chat_template.jinja"};
  return kNames;
}

namespace {
struct FileDigest {
  uint64_t bytes = 0, xxh64 = 0;
};
// Size and XXH64 of a regular file, read in blocks (a side file of any size
// costs one block of memory); nullopt when there is none. A FIFO or folder in
// its place is refused, never taken for absent.
std::optional<FileDigest> digest_file(const std::string& path) {
  if (!io::optional_input_present(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, path + ": cannot open");
  Xxhash64 h;
  FileDigest d;
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), std::streamsize(block.size()));
    const auto n = size_t(in.gcount());
    h.update(block.data(), n);
    d.bytes += n;
  }
  if (in.bad()) fail(ErrorKind::kIo, path + ": cannot read");
  d.xxh64 = h.digest();
  return d;
}
}  // namespace

std::vector<ManifestFile> describe_files(const std::string& folder) {
  std::vector<ManifestFile> out;
  std::vector<const char*> names = {"config.json"};
  for (const char* name : side_file_names()) names.push_back(name);
  for (const char* name : names)
    if (const auto d = digest_file(folder + "/" + name)) out.push_back({name, d->bytes, d->xxh64});
  return out;
}

std::vector<std::string> check_files(const Manifest& m, const std::string& folder) {
  std::vector<std::string> problems;
  // A side file the manifest does not list was added after packing (a
  // tokenizer.json dropped in changes how the pack encodes): never used.
  for (const char* name : side_file_names()) {
    const bool listed = std::any_of(m.files.begin(), m.files.end(), [&](const ManifestFile& f) { return f.file == name; });
    std::error_code ec;
    if (!listed && std::filesystem::exists(folder + "/" + name, ec))
      problems.push_back(folder + "/" + name + ": not listed in manifest.json files (added after packing; remove it "
                         "or re-pack)");
  }
  for (const ManifestFile& f : m.files) {
    const std::string path = folder + "/" + f.file;
    const auto d = digest_file(path);
    if (!d) {
      problems.push_back(path + ": missing (listed in manifest.json files)");
      continue;
    }
    if (d->bytes != f.bytes || d->xxh64 != f.xxh64)
      problems.push_back(path + ": " + std::to_string(d->bytes) + " bytes, checksum " + hash_hex(d->xxh64) +
                         "; manifest.json says " + std::to_string(f.bytes) + " bytes, " + hash_hex(f.xxh64) +
                         " (edited or corrupt)");
  }
  return problems;
}

void compute_counts(Manifest& m) {
  std::map<int64_t, ByteCounts> per_layer;
  ByteCounts globals;
  for (const auto& t : m.tensors) {
    ByteCounts& c = t.layer < 0 ? globals : per_layer[t.layer];
    c.bytes_after += t.bytes;
    c.bytes_before += t.bytes_before;
  }
  m.totals = globals;
  for (auto& l : m.layers) {
    ByteCounts c = per_layer[l.layer];
    for (const auto& e : l.experts) {
      c.bytes_before += e.bytes_before;
      c.expert_bytes_before += e.bytes_before;
      c.expert_bytes_after += e.bytes_after;
      c.class_counts[static_cast<int>(e.cls)]++;
    }
    c.expert_weights = l.moe ? uint64_t(l.experts.size()) * 3 * uint64_t(m.source.hidden_size) *
                                   uint64_t(m.source.moe_intermediate_size)
                             : 0;
    l.counts = c;
    m.totals.bytes_before += c.bytes_before;
    m.totals.bytes_after += c.bytes_after;
    m.totals.expert_bytes_before += c.expert_bytes_before;
    m.totals.expert_bytes_after += c.expert_bytes_after;
    m.totals.expert_weights += c.expert_weights;
    for (int k = 0; k < plan::kNumClasses; ++k) m.totals.class_counts[k] += c.class_counts[k];
  }
  m.file_bytes = 0;
  for (const auto& s : m.shards) m.file_bytes += s.file_bytes;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

namespace {

// JSON null for the -1 / empty that mark "none" (a pruned expert's format,
// group and slot; a global tensor's layer; no attention format).
ordered_json or_null(int64_t v) { return v < 0 ? ordered_json(nullptr) : ordered_json(v); }
ordered_json or_null(const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); }

}  // namespace

void to_json(ordered_json& j, const ByteCounts& c) {
  j["bytes_before"] = c.bytes_before;
  j["bytes_after"] = c.bytes_after;
  j["expert_bytes_before"] = c.expert_bytes_before;
  j["expert_bytes_after"] = c.expert_bytes_after;
  j["expert_weights"] = c.expert_weights;
  j["avg_bits_per_expert_weight"] = c.avg_bits_per_expert_weight();
  ordered_json cc;
  for (int k = 0; k < plan::kNumClasses; ++k) cc[std::string(plan::class_name(plan::ExpertClass(k)))] = c.class_counts[k];
  j["class_counts"] = cc;
  j["pruned"] = c.class_counts[static_cast<int>(plan::ExpertClass::kPruned)];
}

void to_json(ordered_json& j, const ManifestTensor& t) {
  j["name"] = t.name;
  j["kind"] = t.kind;
  j["layer"] = or_null(t.layer);
  if (!t.source.empty()) j["source"] = t.source;
  if (!t.format.empty()) j["format"] = t.format;
  if (!t.part.empty()) j["part"] = t.part;
  j["dtype"] = dtype_name(t.dtype);
  j["shape"] = t.shape;
  j["bytes"] = t.bytes;
  j["bytes_before"] = t.bytes_before;
  j["xxh64"] = hash_hex(t.xxh64);
  j["shard"] = t.shard;
}

void to_json(ordered_json& j, const ManifestGroup& g) {
  j = {{"id", g.id},
       {"format", g.format},
       {"expert_ids", g.expert_ids},
       {"prefix", g.prefix},
       {"expert_ids_tensor", g.expert_ids_tensor},
       {"parts", g.parts}};
}

void to_json(ordered_json& j, const ManifestPart& p) {
  j = {{"proj", kProjNames[p.proj]},
       {"part", p.part},
       {"tensor", p.tensor},
       {"offset", p.offset},
       {"bytes", p.bytes},
       {"xxh64", hash_hex(p.xxh64)}};
}

void to_json(ordered_json& j, const ManifestExpert& e) {
  j["expert"] = e.expert;
  j["class"] = plan::class_name(e.cls);
  j["format"] = or_null(e.format);
  j["bits_per_weight"] = e.bits_per_weight;
  j["group"] = or_null(e.group);
  j["slot"] = or_null(e.slot);
  j["bytes_before"] = e.bytes_before;
  j["bytes_after"] = e.bytes_after;
  if (!e.search.empty()) j["search"] = e.search;
  j["parts"] = e.parts;
}

void to_json(ordered_json& j, const ManifestLayer& l) {
  j["layer"] = l.layer;
  j["moe"] = l.moe;
  j["groups"] = l.groups;
  j["experts"] = l.experts;
  j["totals"] = l.counts;
}

void to_json(ordered_json& j, const ManifestShard& s) {
  j = {{"file", s.file},
       {"file_bytes", s.file_bytes},
       {"header_bytes", s.header_bytes},
       {"header_xxh64", hash_hex(s.header_xxh64)},
       {"data_xxh64", hash_hex(s.data_xxh64)}};
}

void to_json(ordered_json& j, const ManifestFile& f) {
  j = {{"file", f.file}, {"bytes", f.bytes}, {"xxh64", hash_hex(f.xxh64)}};
}

void to_json(ordered_json& j, const PackingStats& p) {
  j = {{"seconds", p.seconds},
       {"threads", p.threads},
       {"max_memory_bytes", p.max_memory_bytes},
       {"estimated_peak_bytes", p.estimated_peak_bytes},
       {"baseline_rss_bytes", p.baseline_rss_bytes},
       {"peak_rss_bytes", p.peak_rss_bytes},
       {"peak_above_baseline_bytes", p.peak_above_baseline_bytes}};
}

ordered_json manifest_to_json(const Manifest& m) {
  ordered_json j;
  j["schema"] = kManifestSchema;
  j["version"] = m.version;
  j["checksum"] = hash_hex(m.checksum);
  j["tool"] = {{"name", "expertquant"}, {"version", m.tool_version}};
  j["source"] = {{"path", m.source.path},
                 {"model_type", m.source.model_type},
                 {"fingerprint", hash_hex(m.source.fingerprint)},
                 {"num_layers", m.source.num_layers},
                 {"num_experts", m.source.num_experts},
                 {"hidden_size", m.source.hidden_size},
                 {"moe_intermediate_size", m.source.moe_intermediate_size},
                 {"tensors", io::tensor_hashes_to_json(m.source.tensors)}};
  if (m.source.mtp_tensors_dropped > 0) j["source"]["mtp_tensors_dropped"] = m.source.mtp_tensors_dropped;
  ordered_json pol;
  pol["kind"] = m.policy.kind;
  if (!m.policy.uniform_format.empty()) pol["uniform_format"] = m.policy.uniform_format;
  pol["attn_format"] = or_null(m.policy.attn_format);
  if (!m.policy.shared_format.empty()) pol["shared_format"] = m.policy.shared_format;
  if (!m.policy.dense_format.empty()) pol["dense_format"] = m.policy.dense_format;
  if (m.policy.allocation_xxh64) pol["allocation_xxh64"] = hash_hex(*m.policy.allocation_xxh64);
  if (m.policy.profile_xxh64) pol["profile_xxh64"] = hash_hex(*m.policy.profile_xxh64);
  if (m.policy.importance_xxh64) pol["importance_xxh64"] = hash_hex(*m.policy.importance_xxh64);
  j["policy"] = pol;
  j["layer_range"] = {{"first", m.first_layer}, {"last", m.last_layer}};
  j["has_globals"] = m.has_globals;
  j["complete"] = m.complete;
  j["shard_size"] = m.shard_size;
  j["shards"] = m.shards;
  j["files"] = m.files;
  j["tensors"] = m.tensors;
  j["layers"] = m.layers;
  j["totals"] = m.totals;
  j["totals"]["file_bytes"] = m.file_bytes;
  j["packing"] = m.packing;
  return j;
}

uint64_t manifest_checksum(const Manifest& m) {
  Manifest head = m;
  head.tensors.clear();
  head.layers.clear();
  // Through text, as a reader sees it: numbers and strings dump identically.
  const json top = json::parse(manifest_to_json(head).dump());
  auto size = [&](const std::string& key, const json&) {
    return key == "tensors" ? m.tensors.size() : key == "layers" ? m.layers.size() : size_t(-1);
  };
  auto element = [&](const std::string& key, const json&, size_t i) {
    const ordered_json e = key == "tensors" ? ordered_json(m.tensors[i]) : ordered_json(m.layers[i]);
    return json::parse(e.dump()).dump();
  };
  return io::canonical_json_xxh64(top, size, element);
}

uint64_t manifest_checksum(const json& j) { return io::canonical_json_xxh64(j); }

void seal_manifest(Manifest& m) { m.checksum = manifest_checksum(m); }

// ---------------------------------------------------------------------------
// Reading and validation
// ---------------------------------------------------------------------------

namespace {

// Manifest fields beyond JsonNode's types: hashes, null-able ids.
uint64_t hash_of(const io::JsonNode& n) {
  uint64_t h = 0;
  if (!parse_hash_hex(n.str(), &h)) n.invalid("not 16 hex digits");
  return h;
}

uint64_t hash_at(const io::JsonNode& o, const char* key) { return hash_of(o.at(key)); }

std::optional<uint64_t> opt_hash(const io::JsonNode& o, const char* key) {
  if (!o.value().contains(key)) return std::nullopt;
  return hash_of(o.member(key));
}

// Present; null maps to -1 (pruned expert's group, global tensor's layer).
int64_t id_or_null(const io::JsonNode& o, const char* key) {
  const auto v = o.nullable(key);
  return v ? v->integer(0) : -1;
}

io::JsonNode array_at(const io::JsonNode& o, const char* key) {
  const io::JsonNode a = o.at(key);
  a.require_array();
  return a;
}

void check_counts(const io::JsonNode& j, const ByteCounts& c) {
  auto eq = [&](const char* key, uint64_t want) {
    const uint64_t got = j.at(key).unsigned_integer();
    if (got != want)
      j.invalid_member(key, "stored " + std::to_string(got) + " but the entries sum to " + std::to_string(want));
  };
  eq("bytes_before", c.bytes_before);
  eq("bytes_after", c.bytes_after);
  eq("expert_bytes_before", c.expert_bytes_before);
  eq("expert_bytes_after", c.expert_bytes_after);
  eq("expert_weights", c.expert_weights);
  const io::JsonNode cc = j.at("class_counts");
  for (int k = 0; k < plan::kNumClasses; ++k) {
    const std::string name(plan::class_name(plan::ExpertClass(k)));
    const int64_t got = cc.at(name.c_str()).integer();
    if (got != c.class_counts[k])
      cc.invalid_member(name, "stored " + std::to_string(got) + " but the experts list " +
                                  std::to_string(c.class_counts[k]));
  }
}

// Reads a manifest section by section, in the order their errors are
// reported: header, source, policy, range, shards, files, tensors, layers
// (each checked against the tensors), totals, packing, and last the checksum.
class ManifestParser {
 public:
  ManifestParser(const json& j, const std::string& label) : j_(j), root_(j, label) {}

  Manifest parse(bool check_checksum) {
    if (!j_.is_object()) invalid(root_.file() + ": a manifest must be a JSON object");
    read_header();
    read_source();
    read_policy();
    read_range();
    read_shards();
    read_files();
    read_tensors();
    read_layers();
    check_totals();
    read_packing();
    read_checksum(check_checksum);
    return std::move(m_);
  }

 private:
  void read_header() {
    if (root_.at("schema").str() != kManifestSchema)
      root_.invalid_member("schema", "expected \"" + std::string(kManifestSchema) + "\"");
    m_.version = static_cast<int>(root_.at("version").integer());
    if (m_.version == 1)
      root_.invalid_member("version", "1 predates the manifest checksum and the source tensor hashes (version 2); "
                                      "re-pack the model with this expertquant");
    if (m_.version != kManifestVersion)
      root_.invalid_member("version", "unsupported version " + std::to_string(m_.version) +
                                          " (this reader understands " + std::to_string(kManifestVersion) + ")");
    m_.tool_version = root_.at("tool").at("version").str();
  }

  void read_source() {
    const io::JsonNode src = root_.at("source");
    Manifest::Source& s = m_.source;
    s.path = src.at("path").str();
    s.model_type = src.at("model_type").str();
    s.fingerprint = hash_at(src, "fingerprint");
    // Same bounds as config.json: nothing below is sized from these, but the
    // loader and merge allocate per layer and per expert.
    s.num_layers = src.at("num_layers").integer(0, model::kMaxConfigLayers);
    s.num_experts = src.at("num_experts").integer(0, model::kMaxConfigExperts);
    s.hidden_size = src.at("hidden_size").integer(0, model::kMaxConfigDim);
    s.moe_intermediate_size = src.at("moe_intermediate_size").integer(0, model::kMaxConfigDim);
    if (src.value().contains("mtp_tensors_dropped")) s.mtp_tensors_dropped = src.at("mtp_tensors_dropped").integer(0);
    s.tensors = io::parse_tensor_hashes(src.at("tensors").value(), root_.file(), "source.tensors");
  }

  void read_policy() {
    const io::JsonNode pol = root_.at("policy");
    Manifest::Policy& p = m_.policy;
    p.kind = pol.at("kind").str();
    if (p.kind != "uniform" && p.kind != "allocation" && p.kind != "profile")
      pol.invalid_member("kind", "must be uniform, allocation or profile");
    p.uniform_format = pol.str_or("uniform_format", "");
    p.attn_format = pol.str_or("attn_format", "");
    p.shared_format = pol.str_or("shared_format", "");
    p.dense_format = pol.str_or("dense_format", "");
    p.allocation_xxh64 = opt_hash(pol, "allocation_xxh64");
    p.profile_xxh64 = opt_hash(pol, "profile_xxh64");
    p.importance_xxh64 = opt_hash(pol, "importance_xxh64");
  }

  void read_range() {
    const io::JsonNode range = root_.at("layer_range");
    m_.first_layer = range.at("first").integer();
    m_.last_layer = range.at("last").integer();
    if (m_.first_layer < 0 || m_.last_layer < m_.first_layer || m_.last_layer >= m_.source.num_layers)
      range.invalid("must satisfy 0 <= first <= last < source.num_layers");
    m_.has_globals = root_.at("has_globals").boolean();
    m_.complete = root_.at("complete").boolean();
    m_.shard_size = root_.at("shard_size").unsigned_integer();
  }

  // Shard and side-file names are joined to the folder: plain names only.
  static std::string plain_file_name(const io::JsonNode& o) {
    const io::JsonNode n = o.at("file");
    std::string file = n.str();
    if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos)
      n.invalid("must be a plain file name");
    return file;
  }

  void read_shards() {
    const io::JsonNode shards = array_at(root_, "shards");
    for (size_t i = 0; i < shards.size(); ++i) {
      const io::JsonNode sj = shards.index(i);
      ManifestShard s;
      s.file = plain_file_name(sj);
      s.file_bytes = sj.at("file_bytes").unsigned_integer();
      s.header_bytes = sj.at("header_bytes").unsigned_integer();
      s.header_xxh64 = hash_at(sj, "header_xxh64");
      s.data_xxh64 = hash_at(sj, "data_xxh64");
      m_.shards.push_back(std::move(s));
    }
  }

  void read_files() {
    if (!j_.contains("files")) return;  // manifests written before the field existed
    const io::JsonNode files = array_at(root_, "files");
    for (size_t i = 0; i < files.size(); ++i) {
      const io::JsonNode fj = files.index(i);
      ManifestFile f;
      f.file = plain_file_name(fj);
      f.bytes = fj.at("bytes").unsigned_integer();
      f.xxh64 = hash_at(fj, "xxh64");
      m_.files.push_back(std::move(f));
    }
  }

  void read_tensors() {
    const io::JsonNode tensors = array_at(root_, "tensors");
    for (size_t i = 0; i < tensors.size(); ++i) {
      ManifestTensor t = read_tensor(tensors.index(i));
      if (!tensor_index_.emplace(t.name, i).second)
        tensors.index(i).invalid_member("name", "tensor " + t.name + " listed twice");
      m_.tensors.push_back(std::move(t));
    }
  }

  ManifestTensor read_tensor(const io::JsonNode& tj) const {
    ManifestTensor t;
    t.name = tj.at("name").str();
    t.kind = tj.at("kind").str();
    if (t.kind != "copy" && t.kind != "quantized" && t.kind != "group_part" && t.kind != "expert_ids")
      tj.invalid_member("kind", "must be copy, quantized, group_part or expert_ids");
    t.layer = id_or_null(tj, "layer");
    t.source = tj.str_or("source", "");
    t.format = tj.str_or("format", "");
    t.part = tj.str_or("part", "");
    if ((t.kind == "quantized" || t.kind == "group_part") && !quant::find_format(t.format))
      tj.invalid_member("format", "unknown format '" + t.format + "'");
    auto dt = parse_dtype(tj.at("dtype").str());
    if (!dt) tj.invalid_member("dtype", "unknown dtype");
    t.dtype = *dt;
    const io::JsonNode shape = array_at(tj, "shape");
    for (size_t d = 0; d < shape.size(); ++d) {
      const json& v = shape.value()[d];
      if (!v.is_number_integer() || v.get<int64_t>() < 0) shape.invalid("dimensions must be non-negative integers");
      t.shape.push_back(v.get<int64_t>());
    }
    const auto numel = checked_numel(t.shape);
    const auto nbytes = numel ? checked_mul(*numel, dtype_size(t.dtype)) : std::nullopt;
    if (!nbytes) shape.invalid("byte size overflows 64 bits");
    t.bytes = tj.at("bytes").unsigned_integer();
    if (t.bytes != *nbytes) tj.invalid_member("bytes", "does not equal shape x dtype size");
    t.bytes_before = tj.at("bytes_before").unsigned_integer();
    t.xxh64 = hash_at(tj, "xxh64");
    t.shard = static_cast<int>(tj.at("shard").integer());
    if (t.shard < 0 || size_t(t.shard) >= m_.shards.size()) tj.invalid_member("shard", "no such shard");
    return t;
  }

  void read_layers() {
    const io::JsonNode layers = array_at(root_, "layers");
    for (size_t li = 0; li < layers.size(); ++li) m_.layers.push_back(read_layer(layers.index(li)));
    // Layer-range completeness: every layer in the range appears exactly once.
    if (int64_t(m_.layers.size()) != m_.last_layer - m_.first_layer + 1)
      layers.invalid("must list every layer of layer_range exactly once");
  }

  ManifestLayer read_layer(const io::JsonNode& lj) const {
    ManifestLayer l;
    l.layer = lj.at("layer").integer();
    if (l.layer < m_.first_layer || l.layer > m_.last_layer) lj.invalid_member("layer", "outside layer_range");
    if (!m_.layers.empty() && l.layer <= m_.layers.back().layer)
      lj.invalid_member("layer", "layers must be ascending and unique");
    l.moe = lj.at("moe").boolean();
    const io::JsonNode groups = array_at(lj, "groups");
    for (size_t gi = 0; gi < groups.size(); ++gi) l.groups.push_back(read_group(groups.index(gi), gi));
    const io::JsonNode experts = array_at(lj, "experts");
    if (l.moe && int64_t(experts.size()) != m_.source.num_experts)
      experts.invalid("has " + std::to_string(experts.size()) + " entries, source.num_experts is " +
                      std::to_string(m_.source.num_experts));
    for (size_t ei = 0; ei < experts.size(); ++ei) l.experts.push_back(read_expert(experts.index(ei), ei, l));
    check_group_slots(l, groups);
    return l;
  }

  ManifestGroup read_group(const io::JsonNode& gj, size_t gi) const {
    ManifestGroup g;
    g.id = static_cast<int>(gj.at("id").integer());
    if (g.id != int(gi)) gj.invalid_member("id", "group ids must be 0, 1, ... in order");
    g.format = gj.at("format").str();
    if (!quant::find_format(g.format)) gj.invalid_member("format", "unknown format '" + g.format + "'");
    const io::JsonNode ids = array_at(gj, "expert_ids");
    for (const auto& e : ids.value()) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= m_.source.num_experts)
        ids.invalid("entries must be expert ids in [0, num_experts)");
      g.expert_ids.push_back(e.get<int64_t>());
    }
    g.prefix = gj.at("prefix").str();
    g.expert_ids_tensor = gj.at("expert_ids_tensor").str();
    if (!tensor_index_.count(g.expert_ids_tensor)) gj.invalid_member("expert_ids_tensor", "names no tensor in 'tensors'");
    const io::JsonNode parts = array_at(gj, "parts");
    for (const auto& p : parts.value()) {
      if (!p.is_string()) parts.invalid("entries must be strings");
      g.parts.push_back(p.get<std::string>());
    }
    check_group_tensors(g, gj);
    return g;
  }

  // The group's tensors hold one row per slot: the expert-id tensor is
  // I32 [slots], every part tensor [slots, ...] of the group's format.
  void check_group_tensors(const ManifestGroup& g, const io::JsonNode& gj) const {
    const uint64_t slots = g.expert_ids.size();
    const ManifestTensor& ids = m_.tensors[tensor_index_.at(g.expert_ids_tensor)];
    if (ids.kind != "expert_ids" || ids.dtype != DType::kI32 || ids.shape != std::vector<int64_t>{int64_t(slots)})
      gj.invalid_member("expert_ids", std::to_string(slots) + " entries, but tensor " + g.expert_ids_tensor +
                                          " is not I32 [" + std::to_string(slots) + "]");
    if (slots == 0) gj.invalid_member("expert_ids", "a group holds at least one expert");
    for (int proj = 0; proj < 3; ++proj)
      for (const auto& part : g.parts) {
        auto it = tensor_index_.find(g.tensor(proj, part));
        if (it == tensor_index_.end())
          gj.invalid_member("parts", "tensor " + g.tensor(proj, part) + " is not in 'tensors'");
        const ManifestTensor& t = m_.tensors[it->second];
        if (t.kind != "group_part" || t.format != g.format || t.part != part || t.shape.empty() ||
            uint64_t(t.shape[0]) != slots)
          gj.invalid_member("expert_ids", std::to_string(slots) + " entries, but tensor " + t.name + " is " + t.kind +
                                              " " + t.format + " " + shape_str(t.shape) +
                                              " (a group_part of this format with one row per slot)");
      }
  }

  // `l`: the layer so far (its groups are complete).
  ManifestExpert read_expert(const io::JsonNode& ej, size_t ei, const ManifestLayer& l) const {
    ManifestExpert e;
    e.expert = ej.at("expert").integer();
    if (e.expert != int64_t(ei)) ej.invalid_member("expert", "must equal its position");
    auto cls = plan::parse_class(ej.at("class").str());
    if (!cls) ej.invalid_member("class", "unknown class");
    e.cls = *cls;
    e.format = ej.str_or("format", "");
    e.bits_per_weight = ej.at("bits_per_weight").number();
    e.group = static_cast<int>(id_or_null(ej, "group"));
    e.slot = static_cast<int>(id_or_null(ej, "slot"));
    e.bytes_before = ej.at("bytes_before").unsigned_integer();
    e.bytes_after = ej.at("bytes_after").unsigned_integer();
    if (ej.find("search")) {
      e.search = ej.at("search").str();
      if (e.search != "half") ej.invalid_member("search", "must be \"half\" when present");
    }
    const bool pruned = e.cls == plan::ExpertClass::kPruned;
    if (pruned != (e.group < 0) || pruned != e.format.empty())
      ej.invalid("a pruned expert has no format/group/slot, a kept one has all three");
    const ManifestGroup* g = pruned ? nullptr : &group_of(e, l, ej);
    uint64_t sum = 0;
    const io::JsonNode parts = array_at(ej, "parts");
    for (size_t pi = 0; pi < parts.size(); ++pi) {
      const io::JsonNode pj = parts.index(pi);
      ManifestPart part = read_part(pj);
      if (g) check_slot_row(part, pi, e, *g, pj);
      const auto new_sum = checked_add(sum, part.bytes);
      if (!new_sum) pj.invalid_member("bytes", "the parts' byte counts overflow 64 bits");
      sum = *new_sum;
      e.parts.push_back(std::move(part));
    }
    if (sum != e.bytes_after) ej.invalid_member("bytes_after", "does not equal the sum of its parts");
    if (pruned ? !e.parts.empty() : e.parts.size() != 3 * g->parts.size())
      parts.invalid("must list each of gate, up, down x the group's parts once");
    return e;
  }

  // A kept expert's group, holding it at its slot in its format.
  const ManifestGroup& group_of(const ManifestExpert& e, const ManifestLayer& l, const io::JsonNode& ej) const {
    if (size_t(e.group) >= l.groups.size()) ej.invalid_member("group", "no such group");
    const ManifestGroup& g = l.groups[size_t(e.group)];
    if (e.slot < 0 || size_t(e.slot) >= g.expert_ids.size() || g.expert_ids[size_t(e.slot)] != e.expert)
      ej.invalid_member("slot", "group " + std::to_string(e.group) + " does not hold this expert at this slot");
    if (g.format != e.format) ej.invalid_member("format", "differs from its group's format " + g.format);
    return g;
  }

  ManifestPart read_part(const io::JsonNode& pj) const {
    ManifestPart part;
    const std::string proj = pj.at("proj").str();
    part.proj = proj == "gate" ? 0 : proj == "up" ? 1 : proj == "down" ? 2 : -1;
    if (part.proj < 0) pj.invalid_member("proj", "must be gate, up or down");
    part.part = pj.at("part").str();
    part.tensor = pj.at("tensor").str();
    part.offset = pj.at("offset").unsigned_integer();
    part.bytes = pj.at("bytes").unsigned_integer();
    part.xxh64 = hash_at(pj, "xxh64");
    auto it = tensor_index_.find(part.tensor);
    if (it == tensor_index_.end()) pj.invalid_member("tensor", "names no tensor in 'tensors'");
    const auto part_end = checked_add(part.offset, part.bytes);
    if (!part_end || *part_end > m_.tensors[it->second].bytes) pj.invalid_member("offset", "range exceeds the tensor");
    return part;
  }

  // Part `pi` of a kept expert is exactly its slot (its row) of its group's
  // tensor for that part.
  void check_slot_row(const ManifestPart& part, size_t pi, const ManifestExpert& e, const ManifestGroup& g,
                      const io::JsonNode& pj) const {
    const size_t np = g.parts.size();
    if (np == 0 || pi >= 3 * np || part.proj != int(pi / np) || part.part != g.parts[pi % np] ||
        part.tensor != g.tensor(part.proj, part.part))
      pj.invalid("parts must be gate, up, down x group " + std::to_string(e.group) +
                 "'s parts in order, each naming the group's tensor");
    const uint64_t row = m_.tensors[tensor_index_.at(part.tensor)].bytes / g.expert_ids.size();
    if (part.offset != uint64_t(e.slot) * row || part.bytes != row)
      pj.invalid_member("offset", "bytes [" + std::to_string(part.offset) + ", +" + std::to_string(part.bytes) +
                                      ") are not slot " + std::to_string(e.slot) + "'s row [" +
                                      std::to_string(uint64_t(e.slot) * row) + ", +" + std::to_string(row) + ") of " +
                                      part.tensor);
  }

  // Every slot of every group is held by the expert that names it (the
  // experts' side was checked by group_of): no slot the tensors do not back.
  void check_group_slots(const ManifestLayer& l, const io::JsonNode& groups) const {
    for (const ManifestGroup& g : l.groups)
      for (size_t s = 0; s < g.expert_ids.size(); ++s) {
        const int64_t e = g.expert_ids[s];
        if (size_t(e) >= l.experts.size() || l.experts[size_t(e)].group != g.id || l.experts[size_t(e)].slot != int(s))
          groups.index(size_t(g.id))
              .invalid_member("expert_ids", "slot " + std::to_string(s) + " names expert " + std::to_string(e) +
                                                ", whose entry is not in group " + std::to_string(g.id) +
                                                " at slot " + std::to_string(s));
      }
  }

  // Stored totals must equal the sums of the entries.
  void check_totals() {
    compute_counts(m_);
    const io::JsonNode layers = root_.at("layers");
    for (size_t li = 0; li < m_.layers.size(); ++li) check_counts(layers.index(li).at("totals"), m_.layers[li].counts);
    const io::JsonNode totals = root_.at("totals");
    check_counts(totals, m_.totals);
    if (totals.at("file_bytes").unsigned_integer() != m_.file_bytes)
      totals.invalid_member("file_bytes", "does not equal the sum of shards[].file_bytes");
  }

  void read_packing() {
    const io::JsonNode pk = root_.at("packing");
    PackingStats& s = m_.packing;
    s.seconds = pk.at("seconds").number();
    s.threads = static_cast<int>(pk.at("threads").integer());
    s.max_memory_bytes = pk.at("max_memory_bytes").unsigned_integer();
    s.estimated_peak_bytes = pk.at("estimated_peak_bytes").unsigned_integer();
    s.baseline_rss_bytes = pk.at("baseline_rss_bytes").unsigned_integer();
    s.peak_rss_bytes = pk.at("peak_rss_bytes").unsigned_integer();
    s.peak_above_baseline_bytes = pk.at("peak_above_baseline_bytes").unsigned_integer();
  }

  // Last: the structure is sound, so a mismatch here is an edit that kept it so.
  void read_checksum(bool check) {
    m_.checksum = hash_at(root_, "checksum");
    if (!check) return;
    const uint64_t actual = manifest_checksum(j_);
    if (actual != m_.checksum)
      invalid(root_.file() + ": content checksum " + hash_hex(actual) + " differs from the recorded checksum " +
              hash_hex(m_.checksum) + " (manifest.json was edited or is corrupt; restore it or re-pack)");
  }

  const json& j_;
  const io::JsonNode root_;
  Manifest m_;
  std::map<std::string, size_t> tensor_index_;  // name -> index in m_.tensors
};

}  // namespace

Manifest parse_manifest(const json& j, const std::string& label, bool check_checksum) {
  return ManifestParser(j, label).parse(check_checksum);
}

std::vector<std::string> check_against_shards(const Manifest& m, const ShardHeaderLookup& header) {
  std::vector<std::string> problems;
  for (const ManifestTensor& t : m.tensors) {
    const std::string where = "shard " + m.shards[size_t(t.shard)].file + ": tensor '" + t.name + "'";
    const io::TensorInfo* info = header(t);
    if (!info) {
      problems.push_back(where + " listed in manifest.json is missing");
      continue;
    }
    if (info->dtype != t.dtype || info->shape != t.shape || info->nbytes() != t.bytes)
      problems.push_back(where + ": the shard holds " + std::string(dtype_name(info->dtype)) + " " +
                         shape_str(info->shape) + ", manifest.json says " + std::string(dtype_name(t.dtype)) + " " +
                         shape_str(t.shape));
  }
  return problems;
}

Manifest parse_manifest_text(std::string_view text, const std::string& label) {
  io::check_json_depth(text, label);
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(label + ": not valid JSON: " + e.what());
  }
  return parse_manifest(j, label);
}

Manifest load_manifest(const std::string& path) {
  std::filesystem::path p = path;
  if (std::filesystem::is_directory(p)) p /= kManifestFile;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) fail(ErrorKind::kIo, "manifest " + p.string() + ": cannot open");
  return parse_manifest_text(io::read_file_bytes(p.string(), kMaxManifestBytes), "manifest " + p.string());
}

}  // namespace eq::pack

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
#include "io/json_guard.h"
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
std::optional<std::string> read_whole(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(ErrorKind::kIo, path + ": cannot read");
  return text;
}
}  // namespace

std::vector<ManifestFile> describe_files(const std::string& folder) {
  std::vector<ManifestFile> out;
  std::vector<const char*> names = {"config.json"};
  for (const char* name : side_file_names()) names.push_back(name);
  for (const char* name : names) {
    const auto text = read_whole(folder + "/" + name);
    if (!text) continue;
    out.push_back({name, text->size(), xxhash64(*text)});
  }
  return out;
}

std::vector<std::string> check_files(const Manifest& m, const std::string& folder) {
  std::vector<std::string> problems;
  for (const ManifestFile& f : m.files) {
    const std::string path = folder + "/" + f.file;
    const auto text = read_whole(path);
    if (!text) {
      problems.push_back(path + ": missing (listed in manifest.json files)");
      continue;
    }
    const uint64_t h = xxhash64(*text);
    if (text->size() != f.bytes || h != f.xxh64)
      problems.push_back(path + ": " + std::to_string(text->size()) + " bytes, checksum " + hash_hex(h) +
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

namespace {

// Feeds the text json::dump() gives for the object `top` minus "checksum"
// (keys sorted, no whitespace); an array member is fed one element at a time
// through `element(key, i)` so that no whole-manifest string is built.
template <class Size, class Element>
uint64_t canonical_hash(const json& top, Size size, Element element) {
  Xxhash64 h;
  auto feed = [&](const std::string& s) { h.update(s.data(), s.size()); };
  feed("{");
  bool first = true;
  for (auto it = top.begin(); it != top.end(); ++it) {
    if (it.key() == "checksum") continue;
    feed((first ? "" : ",") + json(it.key()).dump() + ":");
    first = false;
    const size_t n = size(it.key(), it.value());
    if (n == size_t(-1)) {
      feed(it.value().dump());
      continue;
    }
    feed("[");
    for (size_t i = 0; i < n; ++i) feed((i ? "," : "") + element(it.key(), it.value(), i));
    feed("]");
  }
  feed("}");
  return h.digest();
}

}  // namespace

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
  return canonical_hash(top, size, element);
}

uint64_t manifest_checksum(const json& j) {
  if (!j.is_object()) return 0;
  auto size = [](const std::string&, const json& v) { return v.is_array() ? v.size() : size_t(-1); };
  auto element = [](const std::string&, const json& v, size_t i) { return v[i].dump(); };
  return canonical_hash(j, size, element);
}

void seal_manifest(Manifest& m) { m.checksum = manifest_checksum(m); }

// ---------------------------------------------------------------------------
// Reading and validation
// ---------------------------------------------------------------------------

namespace {

// Typed field access whose errors name the manifest and the JSON path.
struct FieldReader {
  std::string label;

  [[noreturn]] void bad(const std::string& path, const std::string& why) const {
    invalid(label + ": field '" + path + "': " + why);
  }
  const json& req(const json& o, const char* key, const std::string& path) const {
    if (!o.is_object()) bad(path, "not an object");
    auto it = o.find(key);
    if (it == o.end()) bad(path + (path.empty() ? "" : ".") + key, "missing");
    return *it;
  }
  static std::string sub(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
  int64_t i64(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_number_integer()) bad(sub(path, key), "not an integer");
    return v.get<int64_t>();
  }
  // Null maps to -1 (pruned expert's group, global tensor's layer).
  int64_t i64_or_null(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (v.is_null()) return -1;
    if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(sub(path, key), "not a non-negative integer or null");
    return v.get<int64_t>();
  }
  uint64_t u64(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      bad(sub(path, key), "not a non-negative integer");
    return v.get<uint64_t>();
  }
  double num(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_number()) bad(sub(path, key), "not a number");
    return v.get<double>();
  }
  bool boolean(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_boolean()) bad(sub(path, key), "not a boolean");
    return v.get<bool>();
  }
  std::string str(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_string()) bad(sub(path, key), "not a string");
    return v.get<std::string>();
  }
  std::string str_or_null(const json& o, const char* key, const std::string& path) const {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return {};
    if (!it->is_string()) bad(sub(path, key), "not a string");
    return it->get<std::string>();
  }
  uint64_t hash(const json& o, const char* key, const std::string& path) const {
    uint64_t h = 0;
    if (!parse_hash_hex(str(o, key, path), &h)) bad(sub(path, key), "not 16 hex digits");
    return h;
  }
  std::optional<uint64_t> opt_hash(const json& o, const char* key, const std::string& path) const {
    if (!o.contains(key)) return std::nullopt;
    return hash(o, key, path);
  }
  const json& array(const json& o, const char* key, const std::string& path) const {
    const json& v = req(o, key, path);
    if (!v.is_array()) bad(sub(path, key), "not an array");
    return v;
  }
};

std::string idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

void check_counts(const FieldReader& r, const json& j, const ByteCounts& c, const std::string& path) {
  auto eq = [&](const char* key, uint64_t want) {
    const uint64_t got = r.u64(j, key, path);
    if (got != want)
      r.bad(path + "." + key, "stored " + std::to_string(got) + " but the entries sum to " + std::to_string(want));
  };
  eq("bytes_before", c.bytes_before);
  eq("bytes_after", c.bytes_after);
  eq("expert_bytes_before", c.expert_bytes_before);
  eq("expert_bytes_after", c.expert_bytes_after);
  eq("expert_weights", c.expert_weights);
  const json& cc = r.req(j, "class_counts", path);
  for (int k = 0; k < plan::kNumClasses; ++k) {
    const std::string name(plan::class_name(plan::ExpertClass(k)));
    const int64_t got = r.i64(cc, name.c_str(), path + ".class_counts");
    if (got != c.class_counts[k])
      r.bad(path + ".class_counts." + name,
            "stored " + std::to_string(got) + " but the experts list " + std::to_string(c.class_counts[k]));
  }
}

// Reads a manifest section by section, in the order their errors are
// reported: header, source, policy, range, shards, files, tensors, layers
// (each checked against the tensors), totals, packing, and last the checksum.
class ManifestParser {
 public:
  ManifestParser(const json& j, const std::string& label) : j_(j), r_{label} {}

  Manifest parse(bool check_checksum) {
    if (!j_.is_object()) invalid(r_.label + ": a manifest must be a JSON object");
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
    if (r_.str(j_, "schema", "") != kManifestSchema)
      r_.bad("schema", "expected \"" + std::string(kManifestSchema) + "\"");
    m_.version = static_cast<int>(r_.i64(j_, "version", ""));
    if (m_.version == 1)
      r_.bad("version", "1 predates the manifest checksum and the source tensor hashes (version 2); re-pack the model "
                        "with this expertquant");
    if (m_.version != kManifestVersion)
      r_.bad("version", "unsupported version " + std::to_string(m_.version) + " (this reader understands " +
                            std::to_string(kManifestVersion) + ")");
    m_.tool_version = r_.str(r_.req(j_, "tool", ""), "version", "tool");
  }

  void read_source() {
    const json& src = r_.req(j_, "source", "");
    Manifest::Source& s = m_.source;
    s.path = r_.str(src, "path", "source");
    s.model_type = r_.str(src, "model_type", "source");
    s.fingerprint = r_.hash(src, "fingerprint", "source");
    s.num_layers = r_.i64(src, "num_layers", "source");
    s.num_experts = r_.i64(src, "num_experts", "source");
    s.hidden_size = r_.i64(src, "hidden_size", "source");
    s.moe_intermediate_size = r_.i64(src, "moe_intermediate_size", "source");
    if (src.contains("mtp_tensors_dropped")) {
      s.mtp_tensors_dropped = r_.i64(src, "mtp_tensors_dropped", "source");
      if (s.mtp_tensors_dropped < 0) r_.bad("source.mtp_tensors_dropped", "must be non-negative");
    }
    // Same bounds as config.json: nothing below is sized from these, but the
    // loader and merge allocate per layer and per expert.
    auto bound = [&](int64_t v, const char* field, int64_t max) {
      if (v < 0 || v > max) r_.bad(field, "must be in [0, " + std::to_string(max) + "]");
    };
    bound(s.num_layers, "source.num_layers", model::kMaxConfigLayers);
    bound(s.num_experts, "source.num_experts", model::kMaxConfigExperts);
    bound(s.hidden_size, "source.hidden_size", model::kMaxConfigDim);
    bound(s.moe_intermediate_size, "source.moe_intermediate_size", model::kMaxConfigDim);
    s.tensors = io::parse_tensor_hashes(r_.req(src, "tensors", "source"), r_.label, "source.tensors");
  }

  void read_policy() {
    const json& pol = r_.req(j_, "policy", "");
    Manifest::Policy& p = m_.policy;
    p.kind = r_.str(pol, "kind", "policy");
    if (p.kind != "uniform" && p.kind != "allocation" && p.kind != "profile")
      r_.bad("policy.kind", "must be uniform, allocation or profile");
    p.uniform_format = r_.str_or_null(pol, "uniform_format", "policy");
    p.attn_format = r_.str_or_null(pol, "attn_format", "policy");
    p.shared_format = r_.str_or_null(pol, "shared_format", "policy");
    p.dense_format = r_.str_or_null(pol, "dense_format", "policy");
    p.allocation_xxh64 = r_.opt_hash(pol, "allocation_xxh64", "policy");
    p.profile_xxh64 = r_.opt_hash(pol, "profile_xxh64", "policy");
    p.importance_xxh64 = r_.opt_hash(pol, "importance_xxh64", "policy");
  }

  void read_range() {
    const json& range = r_.req(j_, "layer_range", "");
    m_.first_layer = r_.i64(range, "first", "layer_range");
    m_.last_layer = r_.i64(range, "last", "layer_range");
    if (m_.first_layer < 0 || m_.last_layer < m_.first_layer || m_.last_layer >= m_.source.num_layers)
      r_.bad("layer_range", "must satisfy 0 <= first <= last < source.num_layers");
    m_.has_globals = r_.boolean(j_, "has_globals", "");
    m_.complete = r_.boolean(j_, "complete", "");
    m_.shard_size = r_.u64(j_, "shard_size", "");
  }

  // Shard and side-file names are joined to the folder: plain names only.
  std::string plain_file_name(const json& o, const std::string& p) const {
    std::string file = r_.str(o, "file", p);
    if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos)
      r_.bad(p + ".file", "must be a plain file name");
    return file;
  }

  void read_shards() {
    const json& shards = r_.array(j_, "shards", "");
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string p = idx("shards", i);
      ManifestShard s;
      s.file = plain_file_name(shards[i], p);
      s.file_bytes = r_.u64(shards[i], "file_bytes", p);
      s.header_bytes = r_.u64(shards[i], "header_bytes", p);
      s.header_xxh64 = r_.hash(shards[i], "header_xxh64", p);
      s.data_xxh64 = r_.hash(shards[i], "data_xxh64", p);
      m_.shards.push_back(std::move(s));
    }
  }

  void read_files() {
    if (!j_.contains("files")) return;  // manifests written before the field existed
    const json& files = r_.array(j_, "files", "");
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string p = idx("files", i);
      ManifestFile f;
      f.file = plain_file_name(files[i], p);
      f.bytes = r_.u64(files[i], "bytes", p);
      f.xxh64 = r_.hash(files[i], "xxh64", p);
      m_.files.push_back(std::move(f));
    }
  }

  void read_tensors() {
    const json& tensors = r_.array(j_, "tensors", "");
    for (size_t i = 0; i < tensors.size(); ++i) {
      ManifestTensor t = read_tensor(tensors[i], idx("tensors", i));
      if (!tensor_index_.emplace(t.name, i).second)
        r_.bad(idx("tensors", i) + ".name", "tensor " + t.name + " listed twice");
      m_.tensors.push_back(std::move(t));
    }
  }

  ManifestTensor read_tensor(const json& tj, const std::string& p) const {
    ManifestTensor t;
    t.name = r_.str(tj, "name", p);
    t.kind = r_.str(tj, "kind", p);
    if (t.kind != "copy" && t.kind != "quantized" && t.kind != "group_part" && t.kind != "expert_ids")
      r_.bad(p + ".kind", "must be copy, quantized, group_part or expert_ids");
    t.layer = r_.i64_or_null(tj, "layer", p);
    t.source = r_.str_or_null(tj, "source", p);
    t.format = r_.str_or_null(tj, "format", p);
    t.part = r_.str_or_null(tj, "part", p);
    if ((t.kind == "quantized" || t.kind == "group_part") && !quant::find_format(t.format))
      r_.bad(p + ".format", "unknown format '" + t.format + "'");
    auto dt = parse_dtype(r_.str(tj, "dtype", p));
    if (!dt) r_.bad(p + ".dtype", "unknown dtype");
    t.dtype = *dt;
    for (const auto& d : r_.array(tj, "shape", p)) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) r_.bad(p + ".shape", "dimensions must be non-negative integers");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto numel = checked_numel(t.shape);
    const auto nbytes = numel ? checked_mul(*numel, dtype_size(t.dtype)) : std::nullopt;
    if (!nbytes) r_.bad(p + ".shape", "byte size overflows 64 bits");
    t.bytes = r_.u64(tj, "bytes", p);
    if (t.bytes != *nbytes) r_.bad(p + ".bytes", "does not equal shape x dtype size");
    t.bytes_before = r_.u64(tj, "bytes_before", p);
    t.xxh64 = r_.hash(tj, "xxh64", p);
    t.shard = static_cast<int>(r_.i64(tj, "shard", p));
    if (t.shard < 0 || size_t(t.shard) >= m_.shards.size()) r_.bad(p + ".shard", "no such shard");
    return t;
  }

  void read_layers() {
    const json& layers = r_.array(j_, "layers", "");
    for (size_t li = 0; li < layers.size(); ++li) m_.layers.push_back(read_layer(layers[li], idx("layers", li)));
    // Layer-range completeness: every layer in the range appears exactly once.
    if (int64_t(m_.layers.size()) != m_.last_layer - m_.first_layer + 1)
      r_.bad("layers", "must list every layer of layer_range exactly once");
  }

  ManifestLayer read_layer(const json& lj, const std::string& lp) const {
    ManifestLayer l;
    l.layer = r_.i64(lj, "layer", lp);
    if (l.layer < m_.first_layer || l.layer > m_.last_layer) r_.bad(lp + ".layer", "outside layer_range");
    if (!m_.layers.empty() && l.layer <= m_.layers.back().layer)
      r_.bad(lp + ".layer", "layers must be ascending and unique");
    l.moe = r_.boolean(lj, "moe", lp);
    const json& groups = r_.array(lj, "groups", lp);
    for (size_t gi = 0; gi < groups.size(); ++gi) l.groups.push_back(read_group(groups[gi], idx(lp + ".groups", gi), gi));
    const json& experts = r_.array(lj, "experts", lp);
    if (l.moe && int64_t(experts.size()) != m_.source.num_experts)
      r_.bad(lp + ".experts", "has " + std::to_string(experts.size()) + " entries, source.num_experts is " +
                                  std::to_string(m_.source.num_experts));
    for (size_t ei = 0; ei < experts.size(); ++ei)
      l.experts.push_back(read_expert(experts[ei], idx(lp + ".experts", ei), ei, l));
    check_group_slots(l, lp);
    return l;
  }

  ManifestGroup read_group(const json& gj, const std::string& gp, size_t gi) const {
    ManifestGroup g;
    g.id = static_cast<int>(r_.i64(gj, "id", gp));
    if (g.id != int(gi)) r_.bad(gp + ".id", "group ids must be 0, 1, ... in order");
    g.format = r_.str(gj, "format", gp);
    if (!quant::find_format(g.format)) r_.bad(gp + ".format", "unknown format '" + g.format + "'");
    for (const auto& e : r_.array(gj, "expert_ids", gp)) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= m_.source.num_experts)
        r_.bad(gp + ".expert_ids", "entries must be expert ids in [0, num_experts)");
      g.expert_ids.push_back(e.get<int64_t>());
    }
    g.prefix = r_.str(gj, "prefix", gp);
    g.expert_ids_tensor = r_.str(gj, "expert_ids_tensor", gp);
    if (!tensor_index_.count(g.expert_ids_tensor)) r_.bad(gp + ".expert_ids_tensor", "names no tensor in 'tensors'");
    for (const auto& p : r_.array(gj, "parts", gp)) {
      if (!p.is_string()) r_.bad(gp + ".parts", "entries must be strings");
      g.parts.push_back(p.get<std::string>());
    }
    check_group_tensors(g, gp);
    return g;
  }

  // The group's tensors hold one row per slot: the expert-id tensor is
  // I32 [slots], every part tensor [slots, ...] of the group's format.
  void check_group_tensors(const ManifestGroup& g, const std::string& gp) const {
    const uint64_t slots = g.expert_ids.size();
    const ManifestTensor& ids = m_.tensors[tensor_index_.at(g.expert_ids_tensor)];
    if (ids.kind != "expert_ids" || ids.dtype != DType::kI32 || ids.shape != std::vector<int64_t>{int64_t(slots)})
      r_.bad(gp + ".expert_ids", std::to_string(slots) + " entries, but tensor " + g.expert_ids_tensor +
                                     " is not I32 [" + std::to_string(slots) + "]");
    if (slots == 0) r_.bad(gp + ".expert_ids", "a group holds at least one expert");
    for (int proj = 0; proj < 3; ++proj)
      for (const auto& part : g.parts) {
        auto it = tensor_index_.find(g.tensor(proj, part));
        if (it == tensor_index_.end()) r_.bad(gp + ".parts", "tensor " + g.tensor(proj, part) + " is not in 'tensors'");
        const ManifestTensor& t = m_.tensors[it->second];
        if (t.kind != "group_part" || t.format != g.format || t.part != part || t.shape.empty() ||
            uint64_t(t.shape[0]) != slots)
          r_.bad(gp + ".expert_ids", std::to_string(slots) + " entries, but tensor " + t.name + " is " + t.kind + " " +
                                         t.format + " " + shape_str(t.shape) +
                                         " (a group_part of this format with one row per slot)");
      }
  }

  // `l`: the layer so far (its groups are complete).
  ManifestExpert read_expert(const json& ej, const std::string& ep, size_t ei, const ManifestLayer& l) const {
    ManifestExpert e;
    e.expert = r_.i64(ej, "expert", ep);
    if (e.expert != int64_t(ei)) r_.bad(ep + ".expert", "must equal its position");
    auto cls = plan::parse_class(r_.str(ej, "class", ep));
    if (!cls) r_.bad(ep + ".class", "unknown class");
    e.cls = *cls;
    e.format = r_.str_or_null(ej, "format", ep);
    e.bits_per_weight = r_.num(ej, "bits_per_weight", ep);
    e.group = static_cast<int>(r_.i64_or_null(ej, "group", ep));
    e.slot = static_cast<int>(r_.i64_or_null(ej, "slot", ep));
    e.bytes_before = r_.u64(ej, "bytes_before", ep);
    e.bytes_after = r_.u64(ej, "bytes_after", ep);
    if (ej.contains("search")) {
      e.search = r_.str(ej, "search", ep);
      if (e.search != "half") r_.bad(ep + ".search", "must be \"half\" when present");
    }
    const bool pruned = e.cls == plan::ExpertClass::kPruned;
    if (pruned != (e.group < 0) || pruned != e.format.empty())
      r_.bad(ep, "a pruned expert has no format/group/slot, a kept one has all three");
    const ManifestGroup* g = pruned ? nullptr : &group_of(e, l, ep);
    uint64_t sum = 0;
    const json& parts = r_.array(ej, "parts", ep);
    for (size_t pi = 0; pi < parts.size(); ++pi) {
      const std::string pp = idx(ep + ".parts", pi);
      ManifestPart part = read_part(parts[pi], pp);
      if (g) check_slot_row(part, pi, e, *g, pp);
      const auto new_sum = checked_add(sum, part.bytes);
      if (!new_sum) r_.bad(pp + ".bytes", "the parts' byte counts overflow 64 bits");
      sum = *new_sum;
      e.parts.push_back(std::move(part));
    }
    if (sum != e.bytes_after) r_.bad(ep + ".bytes_after", "does not equal the sum of its parts");
    if (pruned ? !e.parts.empty() : e.parts.size() != 3 * g->parts.size())
      r_.bad(ep + ".parts", "must list each of gate, up, down x the group's parts once");
    return e;
  }

  // A kept expert's group, holding it at its slot in its format.
  const ManifestGroup& group_of(const ManifestExpert& e, const ManifestLayer& l, const std::string& ep) const {
    if (size_t(e.group) >= l.groups.size()) r_.bad(ep + ".group", "no such group");
    const ManifestGroup& g = l.groups[size_t(e.group)];
    if (e.slot < 0 || size_t(e.slot) >= g.expert_ids.size() || g.expert_ids[size_t(e.slot)] != e.expert)
      r_.bad(ep + ".slot", "group " + std::to_string(e.group) + " does not hold this expert at this slot");
    if (g.format != e.format) r_.bad(ep + ".format", "differs from its group's format " + g.format);
    return g;
  }

  ManifestPart read_part(const json& pj, const std::string& pp) const {
    ManifestPart part;
    const std::string proj = r_.str(pj, "proj", pp);
    part.proj = proj == "gate" ? 0 : proj == "up" ? 1 : proj == "down" ? 2 : -1;
    if (part.proj < 0) r_.bad(pp + ".proj", "must be gate, up or down");
    part.part = r_.str(pj, "part", pp);
    part.tensor = r_.str(pj, "tensor", pp);
    part.offset = r_.u64(pj, "offset", pp);
    part.bytes = r_.u64(pj, "bytes", pp);
    part.xxh64 = r_.hash(pj, "xxh64", pp);
    auto it = tensor_index_.find(part.tensor);
    if (it == tensor_index_.end()) r_.bad(pp + ".tensor", "names no tensor in 'tensors'");
    const auto part_end = checked_add(part.offset, part.bytes);
    if (!part_end || *part_end > m_.tensors[it->second].bytes) r_.bad(pp + ".offset", "range exceeds the tensor");
    return part;
  }

  // Part `pi` of a kept expert is exactly its slot (its row) of its group's
  // tensor for that part.
  void check_slot_row(const ManifestPart& part, size_t pi, const ManifestExpert& e, const ManifestGroup& g,
                      const std::string& pp) const {
    const size_t np = g.parts.size();
    if (np == 0 || pi >= 3 * np || part.proj != int(pi / np) || part.part != g.parts[pi % np] ||
        part.tensor != g.tensor(part.proj, part.part))
      r_.bad(pp, "parts must be gate, up, down x group " + std::to_string(e.group) +
                     "'s parts in order, each naming the group's tensor");
    const uint64_t row = m_.tensors[tensor_index_.at(part.tensor)].bytes / g.expert_ids.size();
    if (part.offset != uint64_t(e.slot) * row || part.bytes != row)
      r_.bad(pp + ".offset", "bytes [" + std::to_string(part.offset) + ", +" + std::to_string(part.bytes) +
                                 ") are not slot " + std::to_string(e.slot) + "'s row [" +
                                 std::to_string(uint64_t(e.slot) * row) + ", +" + std::to_string(row) + ") of " +
                                 part.tensor);
  }

  // Every slot of every group is held by the expert that names it (the
  // experts' side was checked by group_of): no slot the tensors do not back.
  void check_group_slots(const ManifestLayer& l, const std::string& lp) const {
    for (const ManifestGroup& g : l.groups)
      for (size_t s = 0; s < g.expert_ids.size(); ++s) {
        const int64_t e = g.expert_ids[s];
        if (size_t(e) >= l.experts.size() || l.experts[size_t(e)].group != g.id || l.experts[size_t(e)].slot != int(s))
          r_.bad(idx(lp + ".groups", size_t(g.id)) + ".expert_ids",
                 "slot " + std::to_string(s) + " names expert " + std::to_string(e) + ", whose entry is not in group " +
                     std::to_string(g.id) + " at slot " + std::to_string(s));
      }
  }

  // Stored totals must equal the sums of the entries.
  void check_totals() {
    compute_counts(m_);
    const json& layers = j_.at("layers");
    for (size_t li = 0; li < m_.layers.size(); ++li)
      check_counts(r_, r_.req(layers[li], "totals", idx("layers", li)), m_.layers[li].counts,
                   idx("layers", li) + ".totals");
    check_counts(r_, r_.req(j_, "totals", ""), m_.totals, "totals");
    if (r_.u64(r_.req(j_, "totals", ""), "file_bytes", "totals") != m_.file_bytes)
      r_.bad("totals.file_bytes", "does not equal the sum of shards[].file_bytes");
  }

  void read_packing() {
    const json& pk = r_.req(j_, "packing", "");
    PackingStats& s = m_.packing;
    s.seconds = r_.num(pk, "seconds", "packing");
    s.threads = static_cast<int>(r_.i64(pk, "threads", "packing"));
    s.max_memory_bytes = r_.u64(pk, "max_memory_bytes", "packing");
    s.estimated_peak_bytes = r_.u64(pk, "estimated_peak_bytes", "packing");
    s.baseline_rss_bytes = r_.u64(pk, "baseline_rss_bytes", "packing");
    s.peak_rss_bytes = r_.u64(pk, "peak_rss_bytes", "packing");
    s.peak_above_baseline_bytes = r_.u64(pk, "peak_above_baseline_bytes", "packing");
  }

  // Last: the structure is sound, so a mismatch here is an edit that kept it so.
  void read_checksum(bool check) {
    m_.checksum = r_.hash(j_, "checksum", "");
    if (!check) return;
    const uint64_t actual = manifest_checksum(j_);
    if (actual != m_.checksum)
      invalid(r_.label + ": content checksum " + hash_hex(actual) + " differs from the recorded checksum " +
              hash_hex(m_.checksum) + " (manifest.json was edited or is corrupt; restore it or re-pack)");
  }

  const json& j_;
  FieldReader r_;
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

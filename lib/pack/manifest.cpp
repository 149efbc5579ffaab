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

namespace {
const char* const kFolderFiles[] = {"config.json",           "generation_config.json",  "tokenizer.json",
                                    "tokenizer_config.json", "tokenizer.model",         "special_tokens_map.json",
                                    "vocab.json",            "merges.txt",              "added_tokens.json",
                                    "chat_template.jinja"};

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
  for (const char* name : kFolderFiles) {
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
    for (int k = 0; k < kNumClasses; ++k) m.totals.class_counts[k] += c.class_counts[k];
  }
  m.file_bytes = 0;
  for (const auto& s : m.shards) m.file_bytes += s.file_bytes;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

namespace {

ordered_json counts_json(const ByteCounts& c) {
  ordered_json j;
  j["bytes_before"] = c.bytes_before;
  j["bytes_after"] = c.bytes_after;
  j["expert_bytes_before"] = c.expert_bytes_before;
  j["expert_bytes_after"] = c.expert_bytes_after;
  j["expert_weights"] = c.expert_weights;
  j["avg_bits_per_expert_weight"] = c.avg_bits_per_expert_weight();
  ordered_json cc;
  for (int k = 0; k < kNumClasses; ++k) cc[std::string(class_name(ExpertClass(k)))] = c.class_counts[k];
  j["class_counts"] = cc;
  j["pruned"] = c.class_counts[static_cast<int>(ExpertClass::kPruned)];
  return j;
}

}  // namespace

namespace {

ordered_json tensor_json(const ManifestTensor& t) {
  ordered_json e;
  e["name"] = t.name;
  e["kind"] = t.kind;
  e["layer"] = t.layer < 0 ? ordered_json(nullptr) : ordered_json(t.layer);
  if (!t.source.empty()) e["source"] = t.source;
  if (!t.format.empty()) e["format"] = t.format;
  if (!t.part.empty()) e["part"] = t.part;
  e["dtype"] = dtype_name(t.dtype);
  e["shape"] = t.shape;
  e["bytes"] = t.bytes;
  e["bytes_before"] = t.bytes_before;
  e["xxh64"] = hash_hex(t.xxh64);
  e["shard"] = t.shard;
  return e;
}

ordered_json layer_json(const ManifestLayer& l) {
  ordered_json lj;
  lj["layer"] = l.layer;
  lj["moe"] = l.moe;
  ordered_json groups = ordered_json::array();
  for (const auto& g : l.groups)
    groups.push_back({{"id", g.id},
                      {"format", g.format},
                      {"expert_ids", g.expert_ids},
                      {"prefix", g.prefix},
                      {"expert_ids_tensor", g.expert_ids_tensor},
                      {"parts", g.parts}});
  lj["groups"] = groups;
  ordered_json experts = ordered_json::array();
  for (const auto& e : l.experts) {
    ordered_json ej;
    ej["expert"] = e.expert;
    ej["class"] = class_name(e.cls);
    ej["format"] = e.format.empty() ? ordered_json(nullptr) : ordered_json(e.format);
    ej["bits_per_weight"] = e.bits_per_weight;
    ej["group"] = e.group < 0 ? ordered_json(nullptr) : ordered_json(e.group);
    ej["slot"] = e.slot < 0 ? ordered_json(nullptr) : ordered_json(e.slot);
    ej["bytes_before"] = e.bytes_before;
    ej["bytes_after"] = e.bytes_after;
    ordered_json parts = ordered_json::array();
    for (const auto& p : e.parts)
      parts.push_back({{"proj", kProjNames[p.proj]},
                       {"part", p.part},
                       {"tensor", p.tensor},
                       {"offset", p.offset},
                       {"bytes", p.bytes},
                       {"xxh64", hash_hex(p.xxh64)}});
    ej["parts"] = parts;
    experts.push_back(std::move(ej));
  }
  lj["experts"] = experts;
  lj["totals"] = counts_json(l.counts);
  return lj;
}

}  // namespace

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
  ordered_json pol;
  pol["kind"] = m.policy.kind;
  if (!m.policy.uniform_format.empty()) pol["uniform_format"] = m.policy.uniform_format;
  pol["attn_format"] = m.policy.attn_format.empty() ? ordered_json(nullptr) : ordered_json(m.policy.attn_format);
  if (!m.policy.shared_format.empty()) pol["shared_format"] = m.policy.shared_format;
  if (m.policy.allocation_xxh64) pol["allocation_xxh64"] = hash_hex(*m.policy.allocation_xxh64);
  if (m.policy.profile_xxh64) pol["profile_xxh64"] = hash_hex(*m.policy.profile_xxh64);
  if (m.policy.importance_xxh64) pol["importance_xxh64"] = hash_hex(*m.policy.importance_xxh64);
  j["policy"] = pol;
  j["layer_range"] = {{"first", m.first_layer}, {"last", m.last_layer}};
  j["has_globals"] = m.has_globals;
  j["complete"] = m.complete;
  j["shard_size"] = m.shard_size;
  ordered_json shards = ordered_json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"file", s.file},
                      {"file_bytes", s.file_bytes},
                      {"header_bytes", s.header_bytes},
                      {"header_xxh64", hash_hex(s.header_xxh64)},
                      {"data_xxh64", hash_hex(s.data_xxh64)}});
  j["shards"] = shards;
  ordered_json files = ordered_json::array();
  for (const auto& f : m.files) files.push_back({{"file", f.file}, {"bytes", f.bytes}, {"xxh64", hash_hex(f.xxh64)}});
  j["files"] = files;
  ordered_json tensors = ordered_json::array();
  for (const auto& t : m.tensors) tensors.push_back(tensor_json(t));
  j["tensors"] = tensors;
  ordered_json layers = ordered_json::array();
  for (const auto& l : m.layers) layers.push_back(layer_json(l));
  j["layers"] = layers;
  ordered_json totals = counts_json(m.totals);
  totals["file_bytes"] = m.file_bytes;
  j["totals"] = totals;
  j["packing"] = {{"seconds", m.packing.seconds},
                  {"threads", m.packing.threads},
                  {"max_memory_bytes", m.packing.max_memory_bytes},
                  {"estimated_peak_bytes", m.packing.estimated_peak_bytes},
                  {"baseline_rss_bytes", m.packing.baseline_rss_bytes},
                  {"peak_rss_bytes", m.packing.peak_rss_bytes},
                  {"peak_above_baseline_bytes", m.packing.peak_above_baseline_bytes}};
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
    const ordered_json e = key == "tensors" ? tensor_json(m.tensors[i]) : layer_json(m.layers[i]);
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
  for (int k = 0; k < kNumClasses; ++k) {
    const std::string name(class_name(ExpertClass(k)));
    const int64_t got = r.i64(cc, name.c_str(), path + ".class_counts");
    if (got != c.class_counts[k])
      r.bad(path + ".class_counts." + name,
            "stored " + std::to_string(got) + " but the experts list " + std::to_string(c.class_counts[k]));
  }
}

}  // namespace

Manifest parse_manifest(const json& j, const std::string& label, bool check_checksum) {
  FieldReader r{label};
  Manifest m;
  if (!j.is_object()) invalid(label + ": a manifest must be a JSON object");
  if (r.str(j, "schema", "") != kManifestSchema) r.bad("schema", "expected \"" + std::string(kManifestSchema) + "\"");
  m.version = static_cast<int>(r.i64(j, "version", ""));
  if (m.version == 1)
    r.bad("version", "1 predates the manifest checksum and the source tensor hashes (version 2); re-pack the model "
                     "with this expertquant");
  if (m.version != kManifestVersion)
    r.bad("version", "unsupported version " + std::to_string(m.version) + " (this reader understands " +
                         std::to_string(kManifestVersion) + ")");
  m.tool_version = r.str(r.req(j, "tool", ""), "version", "tool");

  const json& src = r.req(j, "source", "");
  m.source.path = r.str(src, "path", "source");
  m.source.model_type = r.str(src, "model_type", "source");
  m.source.fingerprint = r.hash(src, "fingerprint", "source");
  m.source.num_layers = r.i64(src, "num_layers", "source");
  m.source.num_experts = r.i64(src, "num_experts", "source");
  m.source.hidden_size = r.i64(src, "hidden_size", "source");
  m.source.moe_intermediate_size = r.i64(src, "moe_intermediate_size", "source");
  // Same bounds as config.json: nothing below is sized from these, but the
  // loader and merge allocate per layer and per expert.
  if (m.source.num_layers < 0 || m.source.num_layers > model::kMaxConfigLayers)
    r.bad("source.num_layers", "must be in [0, " + std::to_string(model::kMaxConfigLayers) + "]");
  if (m.source.num_experts < 0 || m.source.num_experts > model::kMaxConfigExperts)
    r.bad("source.num_experts", "must be in [0, " + std::to_string(model::kMaxConfigExperts) + "]");
  if (m.source.hidden_size < 0 || m.source.hidden_size > model::kMaxConfigDim)
    r.bad("source.hidden_size", "must be in [0, " + std::to_string(model::kMaxConfigDim) + "]");
  if (m.source.moe_intermediate_size < 0 || m.source.moe_intermediate_size > model::kMaxConfigDim)
    r.bad("source.moe_intermediate_size", "must be in [0, " + std::to_string(model::kMaxConfigDim) + "]");
  m.source.tensors = io::parse_tensor_hashes(r.req(src, "tensors", "source"), label, "source.tensors");

  const json& pol = r.req(j, "policy", "");
  m.policy.kind = r.str(pol, "kind", "policy");
  if (m.policy.kind != "uniform" && m.policy.kind != "allocation" && m.policy.kind != "profile")
    r.bad("policy.kind", "must be uniform, allocation or profile");
  m.policy.uniform_format = r.str_or_null(pol, "uniform_format", "policy");
  m.policy.attn_format = r.str_or_null(pol, "attn_format", "policy");
  m.policy.shared_format = r.str_or_null(pol, "shared_format", "policy");
  m.policy.allocation_xxh64 = r.opt_hash(pol, "allocation_xxh64", "policy");
  m.policy.profile_xxh64 = r.opt_hash(pol, "profile_xxh64", "policy");
  m.policy.importance_xxh64 = r.opt_hash(pol, "importance_xxh64", "policy");

  const json& range = r.req(j, "layer_range", "");
  m.first_layer = r.i64(range, "first", "layer_range");
  m.last_layer = r.i64(range, "last", "layer_range");
  if (m.first_layer < 0 || m.last_layer < m.first_layer || m.last_layer >= m.source.num_layers)
    r.bad("layer_range", "must satisfy 0 <= first <= last < source.num_layers");
  m.has_globals = r.boolean(j, "has_globals", "");
  m.complete = r.boolean(j, "complete", "");
  m.shard_size = r.u64(j, "shard_size", "");

  const json& shards = r.array(j, "shards", "");
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string p = idx("shards", i);
    ManifestShard s;
    s.file = r.str(shards[i], "file", p);
    if (s.file.empty() || s.file.find('/') != std::string::npos || s.file.find("..") != std::string::npos)
      r.bad(p + ".file", "must be a plain file name");
    s.file_bytes = r.u64(shards[i], "file_bytes", p);
    s.header_bytes = r.u64(shards[i], "header_bytes", p);
    s.header_xxh64 = r.hash(shards[i], "header_xxh64", p);
    s.data_xxh64 = r.hash(shards[i], "data_xxh64", p);
    m.shards.push_back(std::move(s));
  }

  if (j.contains("files")) {
    const json& files = r.array(j, "files", "");
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string p = idx("files", i);
      ManifestFile f;
      f.file = r.str(files[i], "file", p);
      if (f.file.empty() || f.file.find('/') != std::string::npos || f.file.find("..") != std::string::npos)
        r.bad(p + ".file", "must be a plain file name");
      f.bytes = r.u64(files[i], "bytes", p);
      f.xxh64 = r.hash(files[i], "xxh64", p);
      m.files.push_back(std::move(f));
    }
  }

  std::map<std::string, size_t> tensor_index;
  const json& tensors = r.array(j, "tensors", "");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string p = idx("tensors", i);
    const json& tj = tensors[i];
    ManifestTensor t;
    t.name = r.str(tj, "name", p);
    t.kind = r.str(tj, "kind", p);
    if (t.kind != "copy" && t.kind != "quantized" && t.kind != "group_part" && t.kind != "expert_ids")
      r.bad(p + ".kind", "must be copy, quantized, group_part or expert_ids");
    t.layer = r.i64_or_null(tj, "layer", p);
    t.source = r.str_or_null(tj, "source", p);
    t.format = r.str_or_null(tj, "format", p);
    t.part = r.str_or_null(tj, "part", p);
    if ((t.kind == "quantized" || t.kind == "group_part") && !quant::find_format(t.format))
      r.bad(p + ".format", "unknown format '" + t.format + "'");
    auto dt = parse_dtype(r.str(tj, "dtype", p));
    if (!dt) r.bad(p + ".dtype", "unknown dtype");
    t.dtype = *dt;
    const json& shape = r.array(tj, "shape", p);
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) r.bad(p + ".shape", "dimensions must be non-negative integers");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto numel = checked_numel(t.shape);
    const auto nbytes = numel ? checked_mul(*numel, dtype_size(t.dtype)) : std::nullopt;
    if (!nbytes) r.bad(p + ".shape", "byte size overflows 64 bits");
    t.bytes = r.u64(tj, "bytes", p);
    if (t.bytes != *nbytes) r.bad(p + ".bytes", "does not equal shape x dtype size");
    t.bytes_before = r.u64(tj, "bytes_before", p);
    t.xxh64 = r.hash(tj, "xxh64", p);
    t.shard = static_cast<int>(r.i64(tj, "shard", p));
    if (t.shard < 0 || size_t(t.shard) >= m.shards.size()) r.bad(p + ".shard", "no such shard");
    if (!tensor_index.emplace(t.name, i).second) r.bad(p + ".name", "tensor " + t.name + " listed twice");
    m.tensors.push_back(std::move(t));
  }

  const json& layers = r.array(j, "layers", "");
  for (size_t li = 0; li < layers.size(); ++li) {
    const std::string lp = idx("layers", li);
    const json& lj = layers[li];
    ManifestLayer l;
    l.layer = r.i64(lj, "layer", lp);
    if (l.layer < m.first_layer || l.layer > m.last_layer) r.bad(lp + ".layer", "outside layer_range");
    if (!m.layers.empty() && l.layer <= m.layers.back().layer) r.bad(lp + ".layer", "layers must be ascending and unique");
    l.moe = r.boolean(lj, "moe", lp);
    const json& groups = r.array(lj, "groups", lp);
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const std::string gp = idx(lp + ".groups", gi);
      ManifestGroup g;
      g.id = static_cast<int>(r.i64(groups[gi], "id", gp));
      if (g.id != int(gi)) r.bad(gp + ".id", "group ids must be 0, 1, ... in order");
      g.format = r.str(groups[gi], "format", gp);
      if (!quant::find_format(g.format)) r.bad(gp + ".format", "unknown format '" + g.format + "'");
      for (const auto& e : r.array(groups[gi], "expert_ids", gp)) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= m.source.num_experts)
          r.bad(gp + ".expert_ids", "entries must be expert ids in [0, num_experts)");
        g.expert_ids.push_back(e.get<int64_t>());
      }
      g.prefix = r.str(groups[gi], "prefix", gp);
      g.expert_ids_tensor = r.str(groups[gi], "expert_ids_tensor", gp);
      if (!tensor_index.count(g.expert_ids_tensor)) r.bad(gp + ".expert_ids_tensor", "names no tensor in 'tensors'");
      for (const auto& p : r.array(groups[gi], "parts", gp)) {
        if (!p.is_string()) r.bad(gp + ".parts", "entries must be strings");
        g.parts.push_back(p.get<std::string>());
      }
      // The group's tensors hold one row per slot: the expert-id tensor is
      // I32 [slots], every part tensor [slots, ...] of the group's format.
      const uint64_t slots = g.expert_ids.size();
      const ManifestTensor& ids = m.tensors[tensor_index.at(g.expert_ids_tensor)];
      if (ids.kind != "expert_ids" || ids.dtype != DType::kI32 || ids.shape != std::vector<int64_t>{int64_t(slots)})
        r.bad(gp + ".expert_ids", std::to_string(slots) + " entries, but tensor " + g.expert_ids_tensor +
                                      " is not I32 [" + std::to_string(slots) + "]");
      if (slots == 0) r.bad(gp + ".expert_ids", "a group holds at least one expert");
      for (int proj = 0; proj < 3; ++proj)
        for (const auto& part : g.parts) {
          auto it = tensor_index.find(g.tensor(proj, part));
          if (it == tensor_index.end())
            r.bad(gp + ".parts", "tensor " + g.tensor(proj, part) + " is not in 'tensors'");
          const ManifestTensor& t = m.tensors[it->second];
          if (t.kind != "group_part" || t.format != g.format || t.part != part || t.shape.empty() ||
              uint64_t(t.shape[0]) != slots)
            r.bad(gp + ".expert_ids", std::to_string(slots) + " entries, but tensor " + t.name + " is " +
                                          t.kind + " " + t.format + " " + shape_str(t.shape) +
                                          " (a group_part of this format with one row per slot)");
        }
      l.groups.push_back(std::move(g));
    }
    const json& experts = r.array(lj, "experts", lp);
    if (l.moe && int64_t(experts.size()) != m.source.num_experts)
      r.bad(lp + ".experts", "has " + std::to_string(experts.size()) + " entries, source.num_experts is " +
                                 std::to_string(m.source.num_experts));
    for (size_t ei = 0; ei < experts.size(); ++ei) {
      const std::string ep = idx(lp + ".experts", ei);
      const json& ej = experts[ei];
      ManifestExpert e;
      e.expert = r.i64(ej, "expert", ep);
      if (e.expert != int64_t(ei)) r.bad(ep + ".expert", "must equal its position");
      auto cls = parse_class(r.str(ej, "class", ep));
      if (!cls) r.bad(ep + ".class", "unknown class");
      e.cls = *cls;
      e.format = r.str_or_null(ej, "format", ep);
      e.bits_per_weight = r.num(ej, "bits_per_weight", ep);
      e.group = static_cast<int>(r.i64_or_null(ej, "group", ep));
      e.slot = static_cast<int>(r.i64_or_null(ej, "slot", ep));
      e.bytes_before = r.u64(ej, "bytes_before", ep);
      e.bytes_after = r.u64(ej, "bytes_after", ep);
      const bool pruned = e.cls == ExpertClass::kPruned;
      if (pruned != (e.group < 0) || pruned != e.format.empty())
        r.bad(ep, "a pruned expert has no format/group/slot, a kept one has all three");
      if (!pruned) {
        if (size_t(e.group) >= l.groups.size()) r.bad(ep + ".group", "no such group");
        const ManifestGroup& g = l.groups[e.group];
        if (e.slot < 0 || size_t(e.slot) >= g.expert_ids.size() || g.expert_ids[e.slot] != e.expert)
          r.bad(ep + ".slot", "group " + std::to_string(e.group) + " does not hold this expert at this slot");
        if (g.format != e.format) r.bad(ep + ".format", "differs from its group's format " + g.format);
      }
      uint64_t sum = 0;
      const json& parts = r.array(ej, "parts", ep);
      for (size_t pi = 0; pi < parts.size(); ++pi) {
        const std::string pp = idx(ep + ".parts", pi);
        ManifestPart part;
        const std::string proj = r.str(parts[pi], "proj", pp);
        part.proj = proj == "gate" ? 0 : proj == "up" ? 1 : proj == "down" ? 2 : -1;
        if (part.proj < 0) r.bad(pp + ".proj", "must be gate, up or down");
        part.part = r.str(parts[pi], "part", pp);
        part.tensor = r.str(parts[pi], "tensor", pp);
        part.offset = r.u64(parts[pi], "offset", pp);
        part.bytes = r.u64(parts[pi], "bytes", pp);
        part.xxh64 = r.hash(parts[pi], "xxh64", pp);
        auto it = tensor_index.find(part.tensor);
        if (it == tensor_index.end()) r.bad(pp + ".tensor", "names no tensor in 'tensors'");
        const auto part_end = checked_add(part.offset, part.bytes);
        if (!part_end || *part_end > m.tensors[it->second].bytes) r.bad(pp + ".offset", "range exceeds the tensor");
        if (!pruned) {
          // Exactly the expert's slot (its row) of its group's tensor for this part.
          const ManifestGroup& g = l.groups[size_t(e.group)];
          const size_t np = g.parts.size();
          if (np == 0 || pi >= 3 * np || part.proj != int(pi / np) || part.part != g.parts[pi % np] ||
              part.tensor != g.tensor(part.proj, part.part))
            r.bad(pp, "parts must be gate, up, down x group " + std::to_string(e.group) +
                          "'s parts in order, each naming the group's tensor");
          const uint64_t row = m.tensors[it->second].bytes / g.expert_ids.size();
          if (part.offset != uint64_t(e.slot) * row || part.bytes != row)
            r.bad(pp + ".offset", "bytes [" + std::to_string(part.offset) + ", +" + std::to_string(part.bytes) +
                                      ") are not slot " + std::to_string(e.slot) + "'s row [" +
                                      std::to_string(uint64_t(e.slot) * row) + ", +" + std::to_string(row) + ") of " +
                                      part.tensor);
        }
        const auto new_sum = checked_add(sum, part.bytes);
        if (!new_sum) r.bad(pp + ".bytes", "the parts' byte counts overflow 64 bits");
        sum = *new_sum;
        e.parts.push_back(std::move(part));
      }
      if (sum != e.bytes_after) r.bad(ep + ".bytes_after", "does not equal the sum of its parts");
      if (pruned ? !e.parts.empty() : e.parts.size() != 3 * l.groups[size_t(e.group)].parts.size())
        r.bad(ep + ".parts", "must list each of gate, up, down x the group's parts once");
      l.experts.push_back(std::move(e));
    }
    // Every slot of every group is held by the expert that names it (the
    // experts' side was checked above): no slot the tensors do not back.
    for (const ManifestGroup& g : l.groups)
      for (size_t s = 0; s < g.expert_ids.size(); ++s) {
        const int64_t e = g.expert_ids[s];
        if (size_t(e) >= l.experts.size() || l.experts[size_t(e)].group != g.id || l.experts[size_t(e)].slot != int(s))
          r.bad(idx(lp + ".groups", size_t(g.id)) + ".expert_ids",
                "slot " + std::to_string(s) + " names expert " + std::to_string(e) + ", whose entry is not in group " +
                    std::to_string(g.id) + " at slot " + std::to_string(s));
      }
    m.layers.push_back(std::move(l));
  }
  // Layer-range completeness: every layer in the range appears exactly once.
  if (int64_t(m.layers.size()) != m.last_layer - m.first_layer + 1)
    r.bad("layers", "must list every layer of layer_range exactly once");

  compute_counts(m);
  for (size_t li = 0; li < m.layers.size(); ++li)
    check_counts(r, r.req(layers[li], "totals", idx("layers", li)), m.layers[li].counts, idx("layers", li) + ".totals");
  check_counts(r, r.req(j, "totals", ""), m.totals, "totals");
  if (r.u64(r.req(j, "totals", ""), "file_bytes", "totals") != m.file_bytes)
    r.bad("totals.file_bytes", "does not equal the sum of shards[].file_bytes");

  const json& pk = r.req(j, "packing", "");
  m.packing.seconds = r.num(pk, "seconds", "packing");
  m.packing.threads = static_cast<int>(r.i64(pk, "threads", "packing"));
  m.packing.max_memory_bytes = r.u64(pk, "max_memory_bytes", "packing");
  m.packing.estimated_peak_bytes = r.u64(pk, "estimated_peak_bytes", "packing");
  m.packing.baseline_rss_bytes = r.u64(pk, "baseline_rss_bytes", "packing");
  m.packing.peak_rss_bytes = r.u64(pk, "peak_rss_bytes", "packing");
  m.packing.peak_above_baseline_bytes = r.u64(pk, "peak_above_baseline_bytes", "packing");

  // Last: the structure is sound, so a mismatch here is an edit that kept it so.
  m.checksum = r.hash(j, "checksum", "");
  if (check_checksum) {
    const uint64_t actual = manifest_checksum(j);
    if (actual != m.checksum)
      invalid(label + ": content checksum " + hash_hex(actual) + " differs from the recorded checksum " +
              hash_hex(m.checksum) + " (manifest.json was edited or is corrupt; restore it or re-pack)");
  }
  return m;
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

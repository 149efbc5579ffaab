#include "io/tensor_hashes.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/hash.h"
#include "io/safetensors.h"

namespace eq::io {

namespace {
constexpr uint64_t kWindow = 4096;
// Chunks of a full hash: pages are released after each one.
constexpr uint64_t kChunk = 64ull << 20;

std::string describe(const char* kind, uint64_t h) { return std::string(kind) + " " + hash_hex(h); }
}  // namespace

uint64_t sample_hash(std::span<const uint8_t> bytes) {
  Xxhash64 h;
  const uint64_t n = bytes.size();
  h.update(&n, sizeof n);
  if (n <= 3 * kWindow) {
    h.update(bytes);
  } else {
    h.update(bytes.subspan(0, kWindow));
    h.update(bytes.subspan(n / 2 - kWindow / 2, kWindow));
    h.update(bytes.subspan(n - kWindow, kWindow));
  }
  return h.digest();
}

TensorHashes sample_tensor_hashes(const Checkpoint& ckpt) {
  TensorHashes out;
  for (const std::string& name : ckpt.tensor_names()) {  // sorted by name
    const TensorInfo& info = ckpt.info(name);
    const SafetensorsFile& shard = ckpt.shard_of(name);
    // Three pages of the tensor, not the megabytes of read-around each fault
    // would bring in (which added up to a read of the whole checkpoint).
    shard.set_random_access(info, true);
    out.push_back({name, sample_hash(ckpt.view(name).bytes()), std::nullopt});
    shard.release(info);
    shard.set_random_access(info, false);
  }
  return out;
}

uint64_t full_tensor_hash(const Checkpoint& ckpt, const std::string& name) {
  const TensorInfo& info = ckpt.info(name);
  const SafetensorsFile& shard = ckpt.shard_of(name);
  const std::span<const uint8_t> bytes = ckpt.view(name).bytes();
  Xxhash64 h;
  for (uint64_t at = 0; at < bytes.size(); at += kChunk) {
    const uint64_t n = std::min<uint64_t>(kChunk, bytes.size() - at);
    h.update(bytes.subspan(at, n));
    shard.release(info, at, n);
  }
  return h.digest();
}

void add_full_hashes(const Checkpoint& ckpt, TensorHashes& hashes) {
  for (TensorHash& t : hashes) t.full = full_tensor_hash(ckpt, t.name);
}

std::optional<HashDifference> first_difference(const TensorHashes& a, const TensorHashes& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].name < b[j].name))
      return HashDifference{a[i].name, describe("sample xxh64", a[i].sample), "absent"};
    if (i == a.size() || b[j].name < a[i].name)
      return HashDifference{b[j].name, "absent", describe("sample xxh64", b[j].sample)};
    if (a[i].sample != b[j].sample)
      return HashDifference{a[i].name, describe("sample xxh64", a[i].sample), describe("sample xxh64", b[j].sample)};
    if (a[i].full && b[j].full && *a[i].full != *b[j].full)
      return HashDifference{a[i].name, describe("xxh64", *a[i].full), describe("xxh64", *b[j].full)};
    ++i, ++j;
  }
  return std::nullopt;
}

std::optional<HashDifference> first_full_difference(const TensorHashes& recorded, const TensorHashes& actual) {
  std::map<std::string_view, const TensorHash*> by_name;
  for (const TensorHash& t : actual) by_name[t.name] = &t;
  for (const TensorHash& r : recorded) {
    if (!r.full) continue;
    auto it = by_name.find(r.name);
    if (it == by_name.end() || !it->second->full) continue;
    if (*it->second->full != *r.full)
      return HashDifference{r.name, describe("xxh64", *r.full), describe("xxh64", *it->second->full)};
  }
  return std::nullopt;
}

nlohmann::ordered_json tensor_hashes_to_json(const TensorHashes& hashes) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const TensorHash& t : hashes)
    a.push_back({{"name", t.name},
                 {"sample_xxh64", hash_hex(t.sample)},
                 {"xxh64", t.full ? nlohmann::ordered_json(hash_hex(*t.full)) : nlohmann::ordered_json(nullptr)}});
  return a;
}

TensorHashes parse_tensor_hashes(const nlohmann::json& j, const std::string& label, const std::string& field) {
  auto bad = [&](const std::string& f, const std::string& what) { invalid(label + ": field '" + f + "': " + what); };
  if (!j.is_array()) bad(field, "not an array");
  TensorHashes out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = field + "[" + std::to_string(i) + "]";
    const nlohmann::json& e = j[i];
    if (!e.is_object()) bad(p, "not an object");
    auto hex = [&](const char* key, bool nullable) -> std::optional<uint64_t> {
      auto it = e.find(key);
      if (it == e.end()) bad(p + "." + key, "missing");
      if (it->is_null() && nullable) return std::nullopt;
      uint64_t h = 0;
      if (!it->is_string() || !parse_hash_hex(it->get<std::string>(), &h))
        bad(p + "." + key, nullable ? "not 16 hex digits or null" : "not 16 hex digits");
      return h;
    };
    auto name = e.find("name");
    if (name == e.end() || !name->is_string()) bad(p + ".name", "missing or not a string");
    TensorHash t;
    t.name = name->get<std::string>();
    if (!out.empty() && !(out.back().name < t.name)) bad(p + ".name", "names must be sorted and unique");
    t.sample = *hex("sample_xxh64", false);
    t.full = hex("xxh64", true);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace eq::io

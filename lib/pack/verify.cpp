#include "pack/verify.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/hash.h"
#include "io/finite_values.h"
#include "io/safetensors.h"
#include "pack/manifest.h"
#include "quant/format.h"

namespace eq::pack {

namespace fs = std::filesystem;

namespace {

using ShardFiles = std::vector<std::unique_ptr<io::SafetensorsFile>>;
// A tensor found in its shard with the manifest's dtype and shape.
using TensorLocations = std::map<std::string, std::pair<const io::SafetensorsFile*, const io::TensorInfo*>>;

// One shard's size and header/data checksums; null when it cannot be opened.
std::unique_ptr<io::SafetensorsFile> check_shard(const std::string& folder, const ManifestShard& sh, VerifyReport& r) {
  const std::string path = folder + "/" + sh.file;
  ++r.shards;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    r.problems.push_back("shard " + sh.file + ": missing");
    return nullptr;
  }
  const uint64_t size = fs::file_size(path, ec);
  if (size != sh.file_bytes)
    r.problems.push_back("shard " + sh.file + ": " + std::to_string(size) + " bytes, manifest says " +
                         std::to_string(sh.file_bytes));
  {
    std::ifstream in(path, std::ios::binary);
    std::string header(sh.header_bytes, '\0');
    if (!in.read(header.data(), std::streamsize(header.size())) || xxhash64(header) != sh.header_xxh64)
      r.problems.push_back("shard " + sh.file + ": header (bytes 0-" + std::to_string(sh.header_bytes) +
                           ") checksum mismatch");
  }
  std::unique_ptr<io::SafetensorsFile> file;
  try {
    file = io::SafetensorsFile::open(path);
  } catch (const Error& e) {
    r.problems.push_back("shard " + sh.file + ": " + e.what());
    return nullptr;
  }
  Xxhash64 data;
  for (const auto& t : file->tensors()) {
    data.update(file->view(t).bytes());
    file->release(t);
  }
  if (data.digest() != sh.data_xxh64) r.problems.push_back("shard " + sh.file + ": data checksum mismatch");
  return file;
}

// Every manifest tensor, with the hash of its whole bytes; then that no shard
// holds tensors the manifest does not list.
TensorLocations check_tensors(const Manifest& m, const ShardFiles& files, VerifyReport& r) {
  TensorLocations where;
  for (const auto& t : m.tensors) {
    ++r.tensors;
    const auto& file = files[size_t(t.shard)];
    const std::string shard = m.shards[size_t(t.shard)].file;
    if (!file) continue;  // already reported
    const io::TensorInfo* info = file->find(t.name);
    if (!info) {
      r.problems.push_back("shard " + shard + ": tensor " + t.name + " is missing");
      continue;
    }
    if (info->dtype != t.dtype || info->shape != t.shape || info->nbytes() != t.bytes) {
      r.problems.push_back("shard " + shard + ": tensor " + t.name + ": dtype/shape/size differ from the manifest");
      continue;
    }
    where[t.name] = {file.get(), info};
    r.bytes += t.bytes;
    if (xxhash64(file->view(*info).bytes()) != t.xxh64)
      r.problems.push_back("shard " + shard + ": tensor " + t.name + ": checksum mismatch");
    // A copied tensor is read as float by every command that runs the pack:
    // its stored values follow the finiteness rule of io/finite_values.h (a
    // checksum that matches only says the pack wrote them).
    if (t.kind == "copy") try {
        io::require_finite_stored(file->view(*info), "shard " + shard);
      } catch (const Error& e) {
        r.problems.push_back(e.what());
      }
    file->release(*info);
  }
  for (size_t s = 0; s < files.size(); ++s)
    if (files[s] && files[s]->tensors().size() != size_t(std::count_if(m.tensors.begin(), m.tensors.end(),
                                                                       [&](const ManifestTensor& t) { return t.shard == int(s); })))
      r.problems.push_back("shard " + m.shards[s].file + ": holds tensors the manifest does not list");
  return where;
}

// Every expert slice: names the expert whose bytes changed.
void check_expert_slices(const Manifest& m, const TensorLocations& where, VerifyReport& r) {
  for (const auto& l : m.layers)
    for (const auto& e : l.experts) {
      if (e.cls != plan::ExpertClass::kPruned) ++r.experts;
      for (const auto& p : e.parts) {
        auto it = where.find(p.tensor);
        if (it == where.end()) continue;
        const auto* file = it->second.first;
        const auto bytes = file->view(*it->second.second).bytes().subspan(p.offset, p.bytes);
        if (xxhash64(bytes) != p.xxh64)
          r.problems.push_back("shard " + fs::path(file->path()).filename().string() + ": tensor " + p.tensor +
                               ": layer " + std::to_string(l.layer) + " expert " + std::to_string(e.expert) + " " +
                               std::string(kProjNames[p.proj]) + "." + p.part + " checksum mismatch");
      }
    }
}

// Slot `slot`'s rows of the group's part tensors for projection `proj`;
// false when a part tensor was not found (already reported).
bool slot_matrix(const Manifest& m, const ManifestGroup& g, const TensorLocations& where, size_t slot, int proj,
                 quant::PackedMatrix& pm) {
  pm.rows = proj == 2 ? m.source.hidden_size : m.source.moe_intermediate_size;
  pm.cols = proj == 2 ? m.source.moe_intermediate_size : m.source.hidden_size;
  for (const auto& part : g.parts) {
    auto it = where.find(g.tensor(proj, part));
    if (it == where.end()) return false;
    const io::TensorInfo* info = it->second.second;
    const uint64_t per = info->nbytes() / uint64_t(info->shape[0]);
    quant::PartView v;
    v.data = it->second.first->view(*info).data + slot * per;
    v.dtype = info->dtype;
    v.shape.assign(info->shape.begin() + 1, info->shape.end());
    v.nbytes = per;
    pm.parts.push_back(std::move(v));
  }
  return true;
}

// Dequantizes one matrix; reports the first non-finite value, or why it
// cannot be dequantized.
void check_dequantizes(const quant::PackedMatrix& pm, const std::string& what, VerifyReport& r) {
  try {
    quant::validate_packed(pm, what);
    std::vector<float> w(size_t(pm.rows) * size_t(pm.cols));
    pm.format->dequantize(pm, w.data());
    ++r.sampled_matrices;
    for (size_t i = 0; i < w.size(); ++i)
      if (!std::isfinite(w[i])) {
        r.problems.push_back(what + ": dequantized value " + std::to_string(i) + " is not finite");
        break;
      }
  } catch (const Error& e) {
    r.problems.push_back(what + ": " + e.what());
  }
}

// Dequantize a sample of each group: the first and last slot by default.
void check_samples(const Manifest& m, const TensorLocations& where, int samples_per_group, VerifyReport& r) {
  for (const auto& l : m.layers)
    for (const auto& g : l.groups) {
      const quant::FormatTraits* f = quant::find_format(g.format);
      if (!f) {
        r.problems.push_back("layer " + std::to_string(l.layer) + " group " + std::to_string(g.id) +
                             ": unknown format " + g.format);
        continue;
      }
      std::vector<size_t> slots;
      for (int k = 0; k < samples_per_group && size_t(k) < g.expert_ids.size(); ++k)
        slots.push_back(k == 0 ? 0 : g.expert_ids.size() - 1 - size_t(k - 1));
      for (size_t slot : slots)
        for (int proj = 0; proj < 3; ++proj) {
          quant::PackedMatrix pm;
          pm.format = f;
          if (!slot_matrix(m, g, where, slot, proj, pm)) continue;
          check_dequantizes(pm, "layer " + std::to_string(l.layer) + " expert " + std::to_string(g.expert_ids[slot]) +
                                    " " + std::string(kProjNames[proj]),
                            r);
        }
    }
}

}  // namespace

VerifyReport verify_packed(const std::string& folder, int samples_per_group) {
  const Manifest m = load_manifest(folder);
  VerifyReport r;
  ShardFiles files(m.shards.size());
  for (size_t s = 0; s < m.shards.size(); ++s) files[s] = check_shard(folder, m.shards[s], r);

  // config.json and the side files the executor reads.
  for (const std::string& p : check_files(m, folder)) r.problems.push_back(p);

  const TensorLocations where = check_tensors(m, files, r);

  // Expert slices and group rows are addressed through manifest fields that
  // parse_manifest bounded by the manifest's own tensor shapes; those shapes
  // must be the shards' before any slice is read (the problems are reported
  // above, tensor by tensor).
  const bool shards_open = std::all_of(files.begin(), files.end(), [](const auto& f) { return f != nullptr; });
  if (!shards_open || !check_against_shards(m, [&](const ManifestTensor& t) {
                         return files[size_t(t.shard)]->find(t.name);
                       }).empty()) {
    r.problems.push_back("expert slices and dequantization not checked: the shards do not match manifest.json");
    return r;
  }
  check_expert_slices(m, where, r);
  check_samples(m, where, samples_per_group, r);
  return r;
}

}  // namespace eq::pack

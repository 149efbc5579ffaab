#include "pack/verify.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/hash.h"
#include "io/safetensors.h"
#include "pack/manifest.h"
#include "quant/format.h"

namespace eq::pack {

namespace fs = std::filesystem;

VerifyReport verify_packed(const std::string& folder, int samples_per_group) {
  const Manifest m = load_manifest(folder);
  VerifyReport r;
  std::vector<std::unique_ptr<io::SafetensorsFile>> files(m.shards.size());

  for (size_t s = 0; s < m.shards.size(); ++s) {
    const ManifestShard& sh = m.shards[s];
    const std::string path = folder + "/" + sh.file;
    ++r.shards;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      r.problems.push_back("shard " + sh.file + ": missing");
      continue;
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
    try {
      files[s] = io::SafetensorsFile::open(path);
    } catch (const Error& e) {
      r.problems.push_back("shard " + sh.file + ": " + e.what());
      continue;
    }
    Xxhash64 data;
    for (const auto& t : files[s]->tensors()) {
      data.update(files[s]->view(t).bytes());
      files[s]->release(t);
    }
    if (data.digest() != sh.data_xxh64) r.problems.push_back("shard " + sh.file + ": data checksum mismatch");
  }

  // config.json and the side files the executor reads.
  for (const std::string& p : check_files(m, folder)) r.problems.push_back(p);

  // Every manifest tensor, with the hash of its whole bytes.
  std::map<std::string, std::pair<const io::SafetensorsFile*, const io::TensorInfo*>> where;
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
    file->release(*info);
  }
  for (size_t s = 0; s < files.size(); ++s)
    if (files[s] && files[s]->tensors().size() != size_t(std::count_if(m.tensors.begin(), m.tensors.end(),
                                                                       [&](const ManifestTensor& t) { return t.shard == int(s); })))
      r.problems.push_back("shard " + m.shards[s].file + ": holds tensors the manifest does not list");

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

  // Every expert slice: names the expert whose bytes changed.
  for (const auto& l : m.layers)
    for (const auto& e : l.experts) {
      if (e.cls != ExpertClass::kPruned) ++r.experts;
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

  // Dequantize a sample of each group: the first and last slot by default.
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
          pm.rows = proj == 2 ? m.source.hidden_size : m.source.moe_intermediate_size;
          pm.cols = proj == 2 ? m.source.moe_intermediate_size : m.source.hidden_size;
          bool present = true;
          for (const auto& part : g.parts) {
            auto it = where.find(g.tensor(proj, part));
            if (it == where.end()) {
              present = false;
              break;
            }
            const io::TensorInfo* info = it->second.second;
            const uint64_t per = info->nbytes() / uint64_t(info->shape[0]);
            quant::PartView v;
            v.data = it->second.first->view(*info).data + slot * per;
            v.dtype = info->dtype;
            v.shape.assign(info->shape.begin() + 1, info->shape.end());
            v.nbytes = per;
            pm.parts.push_back(std::move(v));
          }
          if (!present) continue;
          const std::string what = "layer " + std::to_string(l.layer) + " expert " +
                                   std::to_string(g.expert_ids[slot]) + " " + std::string(kProjNames[proj]);
          try {
            quant::validate_packed(pm, what);
            std::vector<float> w(size_t(pm.rows) * size_t(pm.cols));
            f->dequantize(pm, w.data());
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
    }
  return r;
}

}  // namespace eq::pack

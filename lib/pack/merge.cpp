#include "pack/merge.h"

#include <algorithm>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/hash.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/config.h"
#include "pack/output.h"
#include "pack/plan.h"

namespace eq::pack {

Manifest run_merge(const MergeRequest& rq) {
  if (rq.inputs.empty()) invalid("merge: no inputs");
  std::vector<Manifest> parts;
  for (const auto& in : rq.inputs) parts.push_back(load_manifest(in));

  const Manifest& ref = parts[0];
  int globals_part = -1;
  std::map<int64_t, size_t> layer_part;  // layer -> input index
  for (size_t i = 0; i < parts.size(); ++i) {
    const Manifest& p = parts[i];
    if (p.source.fingerprint != ref.source.fingerprint)
      invalid("merge: " + rq.inputs[i] + " was packed from a different checkpoint (fingerprint " +
              hash_hex(p.source.fingerprint) + " vs " + hash_hex(ref.source.fingerprint) + " in " + rq.inputs[0] + ")");
    // Same metadata is not the same weights: every part records every source
    // tensor's sample hash, and the full hashes of the tensors it packed.
    if (const auto d = io::first_difference(ref.source.tensors, p.source.tensors))
      invalid("merge: " + rq.inputs[i] + " was packed from a different checkpoint than " + rq.inputs[0] +
              ": source tensor '" + d->tensor + "' has " + d->b + " in " + rq.inputs[i] + "/manifest.json, " + d->a +
              " in " + rq.inputs[0] + "/manifest.json");
    if (p.policy.allocation_xxh64 != ref.policy.allocation_xxh64 || p.policy.attn_format != ref.policy.attn_format ||
        p.policy.shared_format != ref.policy.shared_format || p.policy.dense_format != ref.policy.dense_format ||
        p.policy.importance_xxh64 != ref.policy.importance_xxh64)
      invalid("merge: " + rq.inputs[i] + " was packed with a different policy than " + rq.inputs[0]);
    if (p.has_globals) {
      if (globals_part >= 0)
        invalid("merge: " + rq.inputs[i] + " and " + rq.inputs[size_t(globals_part)] +
                " both hold the tensors outside the layers (both include layer 0)");
      globals_part = int(i);
    }
    for (const auto& l : p.layers)
      if (!layer_part.emplace(l.layer, i).second)
        invalid("merge: layer " + std::to_string(l.layer) + " appears in both " + rq.inputs[layer_part[l.layer]] +
                " and " + rq.inputs[i]);
  }
  for (int64_t l = 0; l < ref.source.num_layers; ++l)
    if (!layer_part.count(l)) invalid("merge: layer " + std::to_string(l) + " is in none of the inputs");
  if (globals_part < 0) invalid("merge: no input holds the tensors outside the layers (the part with layer 0)");

  // Canonical order: globals, then layers ascending, each in its part's order.
  struct Source {
    size_t part;
    const ManifestTensor* t;
  };
  std::vector<Source> order;
  for (const auto& t : parts[size_t(globals_part)].tensors)
    if (t.layer < 0) order.push_back({size_t(globals_part), &t});
  Manifest m = ref;
  // The union of the parts' full hashes (same names, same samples: checked above).
  for (size_t t = 0; t < m.source.tensors.size(); ++t)
    for (const auto& p : parts)
      if (!m.source.tensors[t].full) m.source.tensors[t].full = p.source.tensors[t].full;
  m.layers.clear();
  m.tensors.clear();
  for (const auto& [layer, pi] : layer_part) {
    for (const auto& t : parts[pi].tensors)
      if (t.layer == layer) order.push_back({pi, &t});
    for (const auto& l : parts[pi].layers)
      if (l.layer == layer) m.layers.push_back(l);
  }

  m.shard_size = rq.shard_size ? rq.shard_size : ref.shard_size;
  std::vector<uint64_t> sizes;
  for (const auto& s : order) sizes.push_back(s.t->bytes);
  int num_shards = 1;
  const std::vector<int> shard = assign_shards(sizes, m.shard_size, &num_shards);
  std::vector<OutputTensor> decls;
  for (size_t i = 0; i < order.size(); ++i)
    decls.push_back({order[i].t->name, order[i].t->dtype, order[i].t->shape, order[i].t->bytes, shard[i]});

  // Every part's manifest against its shard headers, before any output.
  std::map<std::pair<size_t, int>, std::unique_ptr<io::SafetensorsFile>> open;
  auto file_of = [&](size_t pi, int shard) -> const io::SafetensorsFile& {
    auto& file = open[{pi, shard}];
    if (!file) file = io::SafetensorsFile::open(rq.inputs[pi] + "/" + parts[pi].shards[size_t(shard)].file);
    return *file;
  };
  for (size_t pi = 0; pi < parts.size(); ++pi) {
    const auto problems = check_against_shards(
        parts[pi], [&](const ManifestTensor& t) { return file_of(pi, t.shard).find(t.name); });
    if (!problems.empty()) invalid("merge: " + rq.inputs[pi] + ": " + problems.front());
  }

  // Locked for the rest of the run; removes its staging folder if anything below throws.
  OutputFolder folder(rq.out_path, rq.force);
  const std::string& partial = folder.staging();
  ShardedOutput out(partial, std::move(decls), num_shards);
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [pi, t] = order[i];
    const io::SafetensorsFile* file = &file_of(pi, t->shard);
    const io::TensorInfo* info = file->find(t->name);
    if (!info || info->nbytes() != t->bytes)
      invalid("merge: " + file->path() + ": tensor " + t->name + " is missing or has the wrong size");
    const uint64_t h = out.append(i, file->view(*info).bytes());
    file->release(*info);
    if (h != t->xxh64)
      invalid("merge: " + file->path() + ": tensor " + t->name + ": checksum mismatch (run expertquant verify " +
              rq.inputs[pi] + ")");
    ManifestTensor mt = *t;
    mt.shard = shard[i];
    m.tensors.push_back(std::move(mt));
  }
  m.shards = out.finish();
  m.first_layer = 0;
  m.last_layer = ref.source.num_layers - 1;
  m.has_globals = true;
  m.complete = true;
  m.packing = {};
  for (const auto& p : parts) {
    m.packing.seconds += p.packing.seconds;
    m.packing.threads = std::max(m.packing.threads, p.packing.threads);
    m.packing.max_memory_bytes = std::max(m.packing.max_memory_bytes, p.packing.max_memory_bytes);
    m.packing.estimated_peak_bytes = std::max(m.packing.estimated_peak_bytes, p.packing.estimated_peak_bytes);
    m.packing.baseline_rss_bytes = std::max(m.packing.baseline_rss_bytes, p.packing.baseline_rss_bytes);
    m.packing.peak_rss_bytes = std::max(m.packing.peak_rss_bytes, p.packing.peak_rss_bytes);
    m.packing.peak_above_baseline_bytes =
        std::max(m.packing.peak_above_baseline_bytes, p.packing.peak_above_baseline_bytes);
  }
  compute_counts(m);
  const std::string gdir = rq.inputs[size_t(globals_part)];
  // Only the side files the part's manifest lists, as it lists them.
  if (const auto problems = check_files(parts[size_t(globals_part)], gdir); !problems.empty())
    invalid("merge: " + problems.front());
  copy_side_files(gdir, partial);
  {
    // The part's config.json already carries the quantization section.
    io::write_file_atomic(partial + "/config.json",
                          io::read_file_bytes(gdir + "/config.json", model::kMaxConfigBytes));
  }
  m.files = describe_files(partial);
  seal_manifest(m);
  folder.write_manifest(m);
  folder.commit();
  return m;
}

}  // namespace eq::pack

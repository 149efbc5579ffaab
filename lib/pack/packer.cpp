#include "pack/packer.h"

#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>

#include <chrono>
#include <map>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "io/checkpoint_fingerprint.h"
#include "io/input_file.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/expert_reader.h"
#include "model/open_checkpoint.h"
#include "pack/output.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "quant/gpus.h"

namespace eq::pack {

namespace {

std::optional<uint64_t> hash_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  io::InputFile in(path);
  Xxhash64 h;
  std::vector<char> buf(1 << 20);
  while (const size_t n = in.read(buf.data(), buf.size())) h.update(buf.data(), n);
  return h.digest();
}

// Drops every source page this process touched: whatever is still needed is
// faulted back from the page cache, so the resident set stays one group.
void release_all(const io::Checkpoint& ckpt) {
  for (const auto& shard : ckpt.shards()) {
    io::TensorInfo whole;
    whole.begin = 0;
    whole.end = shard->file_size() - 8 - shard->header_size();
    shard->release(whole);
  }
  malloc_trim(0);
}

// Where pack's time goes (PackPhases): wall seconds of the packing thread by
// phase, thread-seconds of the workers by step.
class PhaseTimes {
 public:
  enum Phase { kSetup, kCopy, kQuantizePlain, kGroupWork, kGroupWrite, kRelease, kFinish,
               kSourceHash, kRead, kQuantize, kPartHash, kCount };
  using Clock = std::chrono::steady_clock;

  void add(Phase p, Clock::time_point since) {
    ns_[p].fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count(),
                     std::memory_order_relaxed);
  }
  PackPhases phases() const {
    static constexpr const char* kNames[kCount] = {"setup", "copy", "quantize non-expert", "group workers",
                                                   "group write", "release", "finish", "source hash",
                                                   "read and convert", "quantize", "part copy and hash"};
    PackPhases out;
    for (int p = 0; p < kCount; ++p)
      out.entries.push_back({kNames[p], double(ns_[p].load()) * 1e-9, p >= kSourceHash});
    return out;
  }

 private:
  std::atomic<int64_t> ns_[kCount] = {};
};

// Adds the time until it goes out of scope to phase `p`.
class Timed {
 public:
  Timed(PhaseTimes& t, PhaseTimes::Phase p) : t_(t), p_(p), start_(PhaseTimes::Clock::now()) {}
  ~Timed() { t_.add(p_, start_); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  PhaseTimes& t_;
  PhaseTimes::Phase p_;
  PhaseTimes::Clock::time_point start_;
};

struct PackState {
  const io::Checkpoint& ckpt;
  const io::SourceTensors& src;
  const model::ModelConfig& cfg;
  const PackPlan& plan;
  const plan::ImportanceFile* importance;
  ShardedOutput& out;
  Manifest& manifest;
  PackObserver* observer;
  quant::Device device = quant::Device::kCpu;
  quant::TrellisSearch trellis_search = quant::TrellisSearch::kExact;
  PhaseTimes* times = nullptr;
  uint64_t done = 0;
  // Full XXH64 of each source tensor read, taken from the bytes being packed
  // (copies: the output's hash of the same bytes). Filled by workers.
  std::mutex hashed_mu{};
  std::set<std::string> hashing{};
  std::map<std::string, uint64_t> hashed{};

  // Hashes the stored tensors behind logical tensor `name` not hashed yet
  // (a stacked MXFP4 tensor is shared by many experts: hashed once).
  void hash_source(const std::string& name) {
    for (const std::string& stored : src.stored_names(name)) {
      {
        std::lock_guard<std::mutex> lock(hashed_mu);
        if (!hashing.insert(stored).second) continue;
      }
      const uint64_t h = io::full_tensor_hash(ckpt, stored);
      std::lock_guard<std::mutex> lock(hashed_mu);
      hashed[stored] = h;
    }
  }

  void progress(uint64_t bytes, const std::string& what) {
    done += bytes;
    if (observer) observer->on_progress(done, what);
  }

  ManifestTensor record(const PlannedTensor& t, uint64_t hash) {
    ManifestTensor m;
    m.name = t.name;
    m.kind = std::string(tensor_kind_name(t.kind));
    m.layer = t.layer;
    m.source = t.source;
    m.format = t.format ? std::string(t.format->name) : "";
    m.part = t.part;
    m.dtype = t.dtype;
    m.shape = t.shape;
    m.bytes = t.nbytes;
    m.bytes_before = t.bytes_before;
    m.xxh64 = hash;
    m.shard = t.shard;
    return m;
  }

  void copy(size_t i) {
    Timed timed(*times, PhaseTimes::kCopy);
    const PlannedTensor& t = plan.tensors[i];
    const io::TensorInfo& info = ckpt.info(t.source);
    // Copied bytes are never converted here, but every command that runs the
    // pack reads them: a non-finite value is refused now, not there.
    src.check_finite(t.source);
    const uint64_t h = out.append(i, ckpt.view(t.source).bytes());
    ckpt.shard_of(t.source).release(info);
    {
      std::lock_guard<std::mutex> lock(hashed_mu);
      hashing.insert(t.source);
      hashed[t.source] = h;
    }
    manifest.tensors.push_back(record(t, h));
    progress(info.nbytes(), t.source);
  }

  // All parts of one quantized non-expert matrix; returns the next index.
  size_t quantize_plain(size_t i) {
    Timed timed(*times, PhaseTimes::kQuantizePlain);
    const PlannedTensor& t0 = plan.tensors[i];
    const io::SourceTensors::Info& info = src.info(t0.source);
    hash_source(t0.source);
    std::vector<float> w = src.load_f32(t0.source);  // dequantized exactly; pages released
    quant::QuantizeOptions qo;
    qo.seed = xxhash64(t0.source);
    qo.tensor_name = t0.source;
    qo.device = device;
    quant::QuantizedMatrix q = t0.format->quantize(w.data(), info.shape[0], info.shape[1], qo);
    w = {};
    size_t j = i;
    for (; j < plan.tensors.size() && plan.tensors[j].kind == TensorKind::kQuantized &&
           plan.tensors[j].source == t0.source;
         ++j) {
      const auto& part = q.parts.at(size_t(plan.tensors[j].part_index));
      manifest.tensors.push_back(record(plan.tensors[j], out.append(j, part.bytes)));
    }
    progress(info.stored_bytes, t0.source);
    return j;
  }

  // One expert's projection quantized (or its MXFP4 source imported); `buf`
  // holds its float32 weights.
  quant::QuantizedMatrix quantize_expert(const LayerPlan& lp, const GroupPlan& g, int p, int64_t e,
                                         std::vector<float>& buf) {
    const MatrixLayout& l = *g.layout[p];
    const model::Proj proj = model::Proj(p);
    // The per-expert name whatever the layout: messages and seeds agree
    // between a checkpoint and its restacked twin.
    const std::string name = model::expert_weight_name(cfg, lp.layer, e, proj);
    if (model::expert_rows(cfg, proj) != l.rows || model::expert_cols(cfg, proj) != l.cols)
      invalid("tensor " + name + ": expected shape [" + std::to_string(l.rows) + ", " + std::to_string(l.cols) + "]");
    {
      Timed timed(*times, PhaseTimes::kSourceHash);
      hash_source(model::expert_source_tensor(cfg, lp.layer, e, proj));
    }
    if (g.format->import_mxfp4 && model::expert_is_mxfp4(cfg, src, lp.layer, e, proj)) {
      // An MXFP4 source taken by a format that holds MXFP4: its codes and
      // scales are moved bit for bit, never requantized.
      const model::ExpertMxfp4 mx = model::read_expert_mxfp4(cfg, src, lp.layer, e, proj);
      return g.format->import_mxfp4(mx.blocks.data(), mx.scales.data(), mx.rows, mx.cols, name);
    }
    std::vector<float> imp;
    {
      Timed timed(*times, PhaseTimes::kRead);
      buf.resize(size_t(l.rows) * size_t(l.cols));
      model::read_expert_weight(cfg, src, lp.layer, e, proj, buf.data());  // dequantized exactly; pages released
      if (importance)
        imp = importance->load(lp.layer, e, p == 2 ? plan::ImportanceSide::kMid : plan::ImportanceSide::kIn);
    }
    quant::QuantizeOptions qo;
    qo.importance = imp.empty() ? nullptr : imp.data();
    qo.seed = xxhash64(name);
    qo.tensor_name = name;
    qo.device = device;
    Timed timed(*times, PhaseTimes::kQuantize);
    return g.format->quantize(buf.data(), l.rows, l.cols, qo);
  }

  // One projection of one group: the stacked parts of its experts.
  struct Unit {
    const GroupPlan* group = nullptr;
    int proj = 0;
    size_t first_tensor = 0;  // its first part's plan index
    std::vector<std::vector<uint8_t>> stacked{};
    std::vector<std::vector<uint64_t>> hashes{};  // [slot][part]
    std::vector<uint64_t> src_bytes{};
    size_t left = 0;  // experts not finished yet
  };

  // Writes unit `u` (and before a group's first unit, its expert ids): its
  // parts, their manifest records and each expert's share.
  void write_unit(const LayerPlan& lp, Unit& u, ManifestLayer& ml) {
    Timed timed(*times, PhaseTimes::kGroupWrite);
    const GroupPlan& g = *u.group;
    const MatrixLayout& l = *g.layout[u.proj];
    const size_t n = g.experts.size();
    if (u.proj == 0) {
      const size_t i = g.first_tensor;
      std::vector<int32_t> ids(g.experts.begin(), g.experts.end());
      manifest.tensors.push_back(
          record(plan.tensors[i], out.append(i, {reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * 4})));
      // The experts of a trellis format quantized by the GPU's half search
      // say so (their bytes are not the exact search's).
      if (device == quant::Device::kCuda && trellis_search == quant::TrellisSearch::kHalf &&
          g.format->device_quantizer != nullptr && g.format->family == "trellis")
        for (size_t s = 0; s < n; ++s)
          ml.experts[size_t(g.experts[s])].search = std::string(quant::trellis_search_name(trellis_search));
    }
    for (size_t k = 0; k < l.parts.size(); ++k) {
      const size_t i = u.first_tensor + k;
      manifest.tensors.push_back(record(plan.tensors[i], out.append(i, u.stacked[k])));
      std::vector<uint8_t>().swap(u.stacked[k]);  // `= {}` would keep the capacity
      for (size_t s = 0; s < n; ++s) {
        ManifestExpert& me = ml.experts[size_t(g.experts[s])];
        me.parts.push_back({u.proj, l.parts[k].name, plan.tensors[i].name, s * l.parts[k].nbytes, l.parts[k].nbytes,
                            u.hashes[s][k]});
        me.bytes_after += l.parts[k].nbytes;
      }
    }
    uint64_t sum = 0;
    for (auto b : u.src_bytes) sum += b;
    progress(sum, "layer " + std::to_string(lp.layer) + " group " + std::to_string(g.id) + " (" +
                      std::string(g.format->name) + ", " + std::to_string(n) + " experts) " +
                      std::string(kProjNames[u.proj]));
  }

  // A layer's groups, as a sequence of units (one projection of one group,
  // in plan order). Workers take the units' experts in that order, each
  // expert as soon as a worker is free; the worker that finishes a unit's
  // last expert writes it and every finished unit after it, so the tensors
  // go out in plan order while the other workers go on quantizing. With
  // lp.overlap_units a unit's experts may start while the previous unit is
  // still quantized or written (two units' stacked parts held); without, once
  // it is written. Returns the plan index after the layer's last group.
  size_t pack_groups(const LayerPlan& lp, ManifestLayer& ml) {
    std::vector<Unit> units;
    std::vector<std::pair<size_t, size_t>> items;  // (unit, slot), unit-major
    for (const GroupPlan& g : lp.groups) {
      size_t t = g.first_tensor + 1;
      for (int p = 0; p < 3; ++p) {
        Unit u;
        u.group = &g;
        u.proj = p;
        u.first_tensor = t;
        u.left = g.experts.size();
        for (size_t s = 0; s < g.experts.size(); ++s) items.push_back({units.size(), s});
        units.push_back(std::move(u));
        t += g.layout[p]->parts.size();
      }
    }
    const size_t end = units.empty() ? 0 : units.back().first_tensor + units.back().group->layout[2]->parts.size();
    if (items.empty()) return end;
    const size_t ahead = lp.overlap_units ? 1 : 0;
    std::mutex mu;  // guards next, written, failed and every unit's left and buffers
    std::condition_variable cv;
    size_t next = 0, written = 0;
    bool failed = false;
    std::mutex write_mu;  // one writer at a time, in unit order

    // The next expert to quantize, once its unit may start; none when all are
    // taken or a worker failed. Allocates a unit's buffers with its first expert.
    auto take = [&]() -> std::optional<std::pair<size_t, size_t>> {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        if (failed || next == items.size()) return std::nullopt;
        const auto item = items[next];
        if (item.first <= written + ahead) {
          Unit& u = units[item.first];
          if (item.second == 0) {
            const MatrixLayout& l = *u.group->layout[u.proj];
            const size_t n = u.group->experts.size();
            u.stacked.resize(l.parts.size());
            for (size_t k = 0; k < l.parts.size(); ++k) u.stacked[k].resize(n * l.parts[k].nbytes);
            u.hashes.assign(n, std::vector<uint64_t>(l.parts.size()));
            u.src_bytes.assign(n, 0);
          }
          ++next;
          return item;
        }
        cv.wait(lock);
      }
    };
    // Counts an expert of unit `ui` done; the last one writes what is ready.
    auto finished = [&](size_t ui) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (--units[ui].left != 0) return;
      }
      std::lock_guard<std::mutex> write_lock(write_mu);
      for (;;) {
        size_t w;
        {
          std::lock_guard<std::mutex> lock(mu);
          w = written;
          if (failed || w == units.size() || units[w].left != 0) return;
        }
        write_unit(lp, units[w], ml);
        if (units[w].proj == 2) {
          // A group's end: its source pages and freed heap go back, as each
          // group's did before units overlapped (the bound needs it when
          // groups are split small).
          Timed timed(*times, PhaseTimes::kRelease);
          release_all(ckpt);
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          ++written;
        }
        cv.notify_all();
      }
    };

    const size_t workers =
        std::min<size_t>(std::max<size_t>(size_t(plan.threads), quant::device_count(device)), items.size());
    std::optional<Timed> work_time(std::in_place, *times, PhaseTimes::kGroupWork);
    default_pool().run(workers, [&](size_t w) {
      quant::bind_device(device, w);  // worker w's experts go to GPU w mod count
      std::vector<float> buf;
      try {
        while (const auto item = take()) {
          Unit& u = units[item->first];
          const size_t s = item->second;
          const GroupPlan& g = *u.group;
          const MatrixLayout& l = *g.layout[u.proj];
          const int64_t e = g.experts[s];
          u.src_bytes[s] = model::expert_stored_bytes(cfg, src, lp.layer, e, model::Proj(u.proj));
          const quant::QuantizedMatrix q = quantize_expert(lp, g, u.proj, e, buf);
          {
            Timed timed(*times, PhaseTimes::kPartHash);
            EQ_CHECK(q.parts.size() == l.parts.size(), "format " + std::string(g.format->name) + " part count changed");
            for (size_t k = 0; k < l.parts.size(); ++k) {
              EQ_CHECK(q.parts[k].bytes.size() == l.parts[k].nbytes, "format " + std::string(g.format->name) + " part " +
                                                                           l.parts[k].name + " size differs from its layout");
              std::memcpy(u.stacked[k].data() + s * l.parts[k].nbytes, q.parts[k].bytes.data(), l.parts[k].nbytes);
              u.hashes[s][k] = xxhash64(q.parts[k].bytes.data(), l.parts[k].nbytes);
            }
          }
          finished(item->first);
        }
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          failed = true;
        }
        cv.notify_all();
        throw;
      }
    });
    work_time.reset();
    EQ_CHECK(written == units.size(), "pack: a unit of layer " + std::to_string(lp.layer) + " was not written");
    return end;
  }
};

}  // namespace

uint64_t default_max_memory() {
  const uint64_t ram = physical_memory_bytes();
  return ram ? ram / 2 : (8ULL << 30);
}

namespace {
Manifest pack_with(const PackRequest& rq, const model::ModelConfig* config, PackObserver* observer);
}  // namespace

Manifest run_pack(const PackRequest& rq, PackObserver* observer) { return pack_with(rq, nullptr, observer); }

Manifest run_pack(const PackRequest& rq, const model::ModelConfig& config, PackObserver* observer) {
  return pack_with(rq, &config, observer);
}

namespace {

// What the policy options give: the allocation, and what it was checked
// against; fills the manifest's policy section.
struct PolicyInputs {
  plan::Allocation alloc;
  std::optional<plan::ModelFingerprint> profiled;  // --profile: the checkpoint it describes
  io::TensorHashes source_hashes;                             // --profile: sample hashes of every source tensor
  std::unique_ptr<plan::ImportanceFile> importance;
};

PolicyInputs read_policy(const PackRequest& rq, const io::Checkpoint& ckpt, const model::ModelConfig& cfg,
                         Manifest::Policy& policy) {
  PolicyInputs in;
  std::string importance_path;
  std::string policy_label;
  if (!rq.uniform_format.empty()) {
    in.alloc = plan::uniform_allocation(cfg, rq.uniform_format);
    policy.kind = "uniform";
    policy.uniform_format = rq.uniform_format;
    policy_label = "--uniform " + rq.uniform_format;
  } else if (!rq.allocation_path.empty()) {
    in.alloc = plan::load_allocation(rq.allocation_path);
    policy.kind = "allocation";
    policy_label = "allocation " + rq.allocation_path;
  } else {
    plan::ProfileInputs p = plan::read_profile_inputs(rq.profile_path);
    // The profile must describe this checkpoint: config, tensor index and
    // every tensor's sample hash now, the full hashes as packing reads them.
    const plan::ModelFingerprint here = plan::fingerprint_metadata(ckpt, rq.model_path);
    if (const std::string d = plan::fingerprint_difference(p.model, "profile " + rq.profile_path, here,
                                                           "--model " + rq.model_path);
        !d.empty())
      invalid("pack: profile " + rq.profile_path + " was made from a different checkpoint: " + d);
    in.profiled = std::move(p.model);
    in.source_hashes = here.tensors;
    in.alloc = std::move(p.allocation);
    importance_path = p.importance_file;
    policy.shared_format = p.shared_expert_format;
    policy.dense_format = p.dense_mlp_format;
    policy.kind = "profile";
    policy.profile_xxh64 = hash_file(rq.profile_path);
    policy_label = "profile " + rq.profile_path;
  }
  plan::check_allocation(in.alloc, cfg, policy_label);
  policy.allocation_xxh64 = xxhash64(plan::allocation_to_json(in.alloc).dump());
  policy.attn_format = rq.attn_format;
  if (!rq.shared_format.empty()) policy.shared_format = rq.shared_format;
  if (!rq.dense_format.empty()) policy.dense_format = rq.dense_format;
  if (!importance_path.empty()) {
    in.importance = plan::ImportanceFile::open(importance_path, cfg.hidden_size, cfg.moe_intermediate_size);
    policy.importance_xxh64 = hash_file(importance_path);
  }
  return in;
}

PlanOptions plan_options(const PackRequest& rq, const Manifest::Policy& policy) {
  PlanOptions po;
  po.first_layer = rq.first_layer;
  po.last_layer = rq.last_layer;
  po.attn_format = rq.attn_format;
  po.shared_format = policy.shared_format;
  po.dense_format = policy.dense_format;
  po.max_memory = rq.max_memory ? rq.max_memory : default_max_memory();
  if (rq.shard_size == 0) invalid("--shard-size must be positive");
  po.shard_size = rq.shard_size;
  po.max_threads = default_pool().size();
  return po;
}

// The source and the packed range; the source's tensor hashes come last,
// once packing has read them.
void describe_source(const PackRequest& rq, const io::Checkpoint& ckpt, const model::ModelConfig& cfg,
                     const PackPlan& plan, Manifest& m) {
  m.source.path = rq.model_path;
  m.source.model_type = cfg.model_type;
  m.source.fingerprint = io::fingerprint_metadata(ckpt, model::kMaxConfigBytes).source_xxh64;
  m.source.num_layers = cfg.num_layers;
  m.source.num_experts = cfg.num_experts;
  m.source.hidden_size = cfg.hidden_size;
  m.source.moe_intermediate_size = cfg.moe_intermediate_size;
  m.source.mtp_tensors_dropped = plan.mtp_tensors_dropped;
  m.first_layer = plan.layers.front().layer;
  m.last_layer = plan.layers.back().layer;
  m.has_globals = plan.has_globals;
  m.complete = plan.has_globals && m.first_layer == 0 && m.last_layer == cfg.num_layers - 1;
}

// Each planned layer's experts and groups, before their bytes are written
// (the group writer fills in every expert's parts).
ManifestLayer layer_record(const LayerPlan& lp, const model::ModelConfig& cfg, const io::SourceTensors& src) {
  ManifestLayer ml;
  ml.layer = lp.layer;
  ml.moe = lp.moe;
  for (size_t e = 0; e < lp.experts.size(); ++e) {
    ManifestExpert me;
    me.expert = int64_t(e);
    me.cls = lp.experts[e].cls;
    me.format = lp.experts[e].format;
    me.group = lp.expert_group[e];
    me.slot = lp.expert_slot[e];
    for (int p = 0; p < 3; ++p)
      me.bytes_before += model::expert_stored_bytes(cfg, src, lp.layer, int64_t(e), model::Proj(p));
    ml.experts.push_back(std::move(me));
  }
  for (const auto& g : lp.groups) {
    ManifestGroup mg;
    mg.id = g.id;
    mg.format = std::string(g.format->name);
    mg.expert_ids = g.experts;
    mg.prefix = g.prefix;
    mg.expert_ids_tensor = g.prefix + ".expert_ids";
    for (const auto& part : g.layout[0]->parts) mg.parts.push_back(part.name);
    ml.groups.push_back(std::move(mg));
  }
  return ml;
}

// Write order = plan order: globals, then per layer its plain tensors and groups.
void write_tensors(PackState& st, const PackPlan& plan, Manifest& m) {
  size_t i = 0;
  size_t layer_index = 0;
  while (i < plan.tensors.size()) {
    const PlannedTensor& t = plan.tensors[i];
    if (t.kind == TensorKind::kCopy) {
      st.copy(i++);
    } else if (t.kind == TensorKind::kQuantized) {
      i = st.quantize_plain(i);
    } else {
      // The layer's first group: all its groups.
      while (plan.layers[layer_index].layer != t.layer) ++layer_index;
      const LayerPlan& lp = plan.layers[layer_index];
      EQ_CHECK(t.kind == TensorKind::kExpertIds && i == lp.groups.front().first_tensor,
               "pack: layer " + std::to_string(lp.layer) + "'s groups do not start at " + t.name);
      i = st.pack_groups(lp, m.layers[layer_index]);
    }
  }
}

// The full hashes packing took of what it read; with --profile they must be
// the profiled checkpoint's.
void record_source_hashes(const PackRequest& rq, const PackState& st, const PolicyInputs& policy,
                          io::TensorHashes source_hashes, Manifest& m) {
  for (io::TensorHash& t : source_hashes)
    if (auto it = st.hashed.find(t.name); it != st.hashed.end()) t.full = it->second;
  m.source.tensors = std::move(source_hashes);
  if (policy.profiled)
    if (const auto d = io::first_full_difference(policy.profiled->tensors, m.source.tensors))
      invalid("pack: --model " + rq.model_path + ": tensor '" + d->tensor + "' has " + d->b + ", profile " +
              rq.profile_path + " records " + d->a + " (it was profiled from different weights); nothing written");
}

void record_packing(const PackPlan& plan, const PlanOptions& po, uint64_t baseline,
                    std::chrono::steady_clock::time_point t0, PackingStats& s) {
  s.threads = plan.threads;
  s.max_memory_bytes = po.max_memory;
  s.estimated_peak_bytes = plan.estimated_peak;
  s.baseline_rss_bytes = baseline;
  // Measured before the manifest is streamed out; that step is bounded by one layer's JSON.
  s.peak_rss_bytes = peak_rss_bytes();
  s.peak_above_baseline_bytes = s.peak_rss_bytes > baseline ? s.peak_rss_bytes - baseline : 0;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Manifest pack_with(const PackRequest& rq, const model::ModelConfig* config, PackObserver* observer) {
  const auto t0 = std::chrono::steady_clock::now();
  const int policies = !rq.uniform_format.empty() + !rq.allocation_path.empty() + !rq.profile_path.empty();
  if (policies != 1) invalid("pack: give exactly one of --uniform, --allocation, --profile");
  quant::require_device(rq.device);
  quant::set_trellis_search(rq.trellis_search);

  const auto [ckpt, cfg] = model::open_checkpoint(rq.model_path, config);
  const io::SourceTensors src(*ckpt, cfg.source_quant);
  model::check_against_checkpoint(cfg, src);

  Manifest m;
  m.tool_version = EQ_VERSION;
  PolicyInputs policy = read_policy(rq, *ckpt, cfg, m.policy);
  const PlanOptions po = plan_options(rq, m.policy);
  const PackPlan plan = make_plan(src, cfg, policy.alloc, po);
  describe_source(rq, *ckpt, cfg, plan, m);
  io::TensorHashes source_hashes = policy.source_hashes.empty() ? io::sample_tensor_hashes(*ckpt)
                                                                : std::move(policy.source_hashes);
  m.shard_size = po.shard_size;

  // Locked for the rest of the run; removes its staging folder if anything below throws.
  OutputFolder folder(rq.out_path, rq.force);
  const std::string& partial = folder.staging();
  // The bound counts bytes above what the process holds now (binary, libraries,
  // checkpoint index, plan); the kernel's peak mark restarts here when it can.
  release_all(*ckpt);
  reset_peak_rss();
  const uint64_t baseline = current_rss_bytes();
  if (observer) observer->on_plan(plan, plan.total_bytes_before);

  std::vector<OutputTensor> decls;
  for (const auto& t : plan.tensors) decls.push_back({t.name, t.dtype, t.shape, t.nbytes, t.shard});
  ShardedOutput out(partial, std::move(decls), plan.num_shards);
  PhaseTimes times;
  PackState st{*ckpt, src, cfg, plan, policy.importance.get(), out, m, observer, rq.device, rq.trellis_search, &times};
  for (const auto& lp : plan.layers) m.layers.push_back(layer_record(lp, cfg, src));
  times.add(PhaseTimes::kSetup, t0);
  write_tensors(st, plan, m);
  const auto written = std::chrono::steady_clock::now();
  release_all(*ckpt);
  record_source_hashes(rq, st, policy, std::move(source_hashes), m);
  m.shards = out.finish();
  for (auto& l : m.layers)
    for (auto& e : l.experts)
      e.bits_per_weight = e.bytes_after ? 8.0 * double(e.bytes_after) / double(3 * cfg.hidden_size * cfg.moe_intermediate_size) : 0.0;
  compute_counts(m);

  write_packed_config(ckpt->folder(), partial);
  copy_side_files(ckpt->folder(), partial);
  m.files = describe_files(partial);  // what the executor reads besides the shards
  record_packing(plan, po, baseline, t0, m.packing);
  seal_manifest(m);
  folder.write_manifest(m);
  folder.commit();
  times.add(PhaseTimes::kFinish, written);
  if (observer) observer->on_phases(times.phases());
  return m;
}

}  // namespace

}  // namespace eq::pack

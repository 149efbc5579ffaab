#include "exec/packed_model.h"

#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory.h"
#include "exec/cuda/device_layers.h"
#include "exec/cuda/device_linear.h"
#include "exec/packed_linear.h"
#include "exec/packed_moe_block.h"
#include "io/checkpoint_fingerprint.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/expert_reader.h"
#include "model/open_checkpoint.h"
#include "core/shape.h"

namespace eq::exec {
namespace {

// Every tensor the manifest lists is in the folder with its dtype, shape and
// size (pack::check_against_shards: every slice the manifest selects is then
// inside its tensor); with `verify`, its bytes hash to the recorded checksum.
uint64_t check_tensors(const pack::Manifest& m, const io::Checkpoint& packed, const std::string& folder, bool verify) {
  const auto problems = pack::check_against_shards(
      m, [&](const pack::ManifestTensor& t) { return packed.has(t.name) ? &packed.info(t.name) : nullptr; });
  if (!problems.empty()) invalid(folder + ": " + problems.front());
  uint64_t hashed = 0;
  for (const pack::ManifestTensor& t : m.tensors) {
    const std::string where = folder + ": tensor '" + t.name + "'";
    const io::TensorInfo& info = packed.info(t.name);
    if (!verify) continue;
    const uint64_t h = xxhash64(packed.view(t.name).bytes());
    packed.shard_of(t.name).release(info);  // hashed once: its pages need not stay resident
    hashed += info.nbytes();
    if (h != t.xxh64)
      invalid(where + ": checksum " + hash_hex(h) + " differs from manifest.json " + hash_hex(t.xxh64) +
              " (corrupt shard; run `expertquant verify`)");
  }
  return hashed;
}

// The reference checkpoint holds the weights the folder was packed from:
// every tensor's sample hash, and with `verify` the full hash of every tensor
// the manifest records one for (a streaming read: the reference forward reads
// the same bytes). Returns the bytes hashed.
[[noreturn]] void refuse_source(const pack::Manifest& m, const std::string& model_path, const std::string& folder,
                                const std::string& tensor, const std::string& here, const std::string& there) {
  invalid(model_path + ": tensor '" + tensor + "' has " + here + ", " + folder + "/manifest.json records " + there +
          " for the checkpoint it was packed from (" + m.source.path + "): --model must be that checkpoint");
}

uint64_t check_source_data(const pack::Manifest& m, const io::Checkpoint& source, const std::string& model_path,
                           const std::string& folder, bool verify) {
  auto refuse = [&](const std::string& tensor, const std::string& here, const std::string& there) {
    refuse_source(m, model_path, folder, tensor, here, there);
  };
  if (const auto d = io::first_difference(m.source.tensors, io::sample_tensor_hashes(source)))
    refuse(d->tensor, d->b, d->a);
  uint64_t hashed = 0;
  if (!verify) return hashed;
  for (const io::TensorHash& t : m.source.tensors) {
    if (!t.full) continue;
    const uint64_t h = io::full_tensor_hash(source, t.name);
    hashed += source.info(t.name).nbytes();
    if (h != *t.full) refuse(t.name, "xxh64 " + hash_hex(h), "xxh64 " + hash_hex(*t.full));
  }
  return hashed;
}

quant::PackedMatrix expert_matrix(const pack::ManifestExpert& me, int proj, const quant::FormatTraits& f,
                                  int64_t rows, int64_t cols, const io::Checkpoint& packed, const std::string& what) {
  quant::PackedMatrix m;
  m.format = &f;
  m.rows = rows;
  m.cols = cols;
  std::vector<quant::PartSpec> specs;
  specs = f.part_specs(rows, cols);
  for (const pack::ManifestPart& p : me.parts) {
    if (p.proj != proj) continue;
    const io::TensorInfo& info = packed.info(p.tensor);
    if (p.offset + p.bytes > info.nbytes())
      invalid(what + ": part '" + p.part + "' bytes [" + std::to_string(p.offset) + ", " +
              std::to_string(p.offset + p.bytes) + ") exceed tensor '" + p.tensor + "'");
    quant::PartView v;
    v.data = packed.view(p.tensor).data + p.offset;
    v.dtype = info.dtype;
    v.nbytes = p.bytes;
    const size_t i = m.parts.size();
    if (i < specs.size())
      v.shape = specs[i].shape;
    else
      v.shape.assign(info.shape.begin() + 1, info.shape.end());
    m.parts.push_back(std::move(v));
  }
  quant::validate_packed(m, what);
  return m;
}

PackedLayer build_layer(const pack::ManifestLayer& ml, const model::ModelConfig& c, const io::SourceTensors& tensors,
                        const std::string& folder) {
  const io::Checkpoint& packed = tensors.checkpoint();
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts;
  const std::string lw = folder + ": layer " + std::to_string(ml.layer);
  if (static_cast<int64_t>(ml.experts.size()) != E)
    invalid(lw + ": manifest lists " + std::to_string(ml.experts.size()) + " experts, config has " +
            std::to_string(E));
  PackedLayer pl;
  pl.layer = ml.layer;
  pl.num_experts = E;
  pl.experts.assign(static_cast<size_t>(E), {});
  // The routed experts' biases travel as copied tensors of the folder, in the
  // source's layout; the reader de-interleaves them.
  for (model::Proj p : {model::Proj::kGate, model::Proj::kUp, model::Proj::kDown})
    pl.expert_bias[static_cast<size_t>(p)] = model::read_layer_expert_bias(c, tensors, ml.layer, p);
  auto bias = [&](model::Proj p, int64_t e) -> const float* {
    const std::vector<float>& b = pl.expert_bias[static_cast<size_t>(p)];
    return b.empty() ? nullptr : b.data() + e * model::expert_rows(c, p);
  };
  std::map<int, int> index_of_group;
  for (const pack::ManifestGroup& g : ml.groups) {
    const std::string gw = lw + " group " + std::to_string(g.id);
    BitGroup bg;
    bg.id = static_cast<int>(pl.groups.size());
    bg.format = &quant::format_by_name(g.format);
    bg.expert_ids = g.expert_ids;
    index_of_group[g.id] = bg.id;
    // The stacked ids tensor must agree with the manifest's slot order.
    const io::TensorInfo& ids = packed.info(g.expert_ids_tensor);
    if (ids.dtype != DType::kI32 || ids.numel() != g.expert_ids.size())
      invalid(gw + ": tensor '" + g.expert_ids_tensor + "' is not I32 [" + std::to_string(g.expert_ids.size()) + "]");
    const int32_t* stored = reinterpret_cast<const int32_t*>(packed.view(g.expert_ids_tensor).data);
    for (size_t s = 0; s < g.expert_ids.size(); ++s) {
      const int64_t e = g.expert_ids[s];
      int32_t v;
      std::memcpy(&v, stored + s, sizeof v);
      if (v != e)
        invalid(gw + ": tensor '" + g.expert_ids_tensor + "' slot " + std::to_string(s) + " holds expert " +
                std::to_string(v) + ", manifest.json says " + std::to_string(e));
      if (e < 0 || e >= E) invalid(gw + ": expert id " + std::to_string(e) + " out of range");
      const pack::ManifestExpert& me = ml.experts[static_cast<size_t>(e)];
      const std::string ew = lw + " expert " + std::to_string(e);
      if (me.group != g.id || me.slot != static_cast<int>(s) || me.format != g.format)
        invalid(ew + ": manifest entry (group " + std::to_string(me.group) + ", slot " + std::to_string(me.slot) +
                ", format " + me.format + ") disagrees with group " + std::to_string(g.id) + " slot " +
                std::to_string(s));
      ExpertWeights w;
      w.gate = expert_matrix(me, 0, *bg.format, I, H, packed, ew + " gate");
      w.up = expert_matrix(me, 1, *bg.format, I, H, packed, ew + " up");
      w.down = expert_matrix(me, 2, *bg.format, H, I, packed, ew + " down");
      w.gate_bias = bias(model::Proj::kGate, e);
      w.up_bias = bias(model::Proj::kUp, e);
      w.down_bias = bias(model::Proj::kDown, e);
      w.act = c.expert_activation;
      bg.slots.push_back(std::move(w));
      bg.bytes += me.bytes_after;
      pl.experts[static_cast<size_t>(e)] = {bg.id, static_cast<int>(s)};
    }
    pl.groups.push_back(std::move(bg));
  }
  for (int64_t e = 0; e < E; ++e) {
    const pack::ManifestExpert& me = ml.experts[static_cast<size_t>(e)];
    const bool pruned = me.cls == plan::ExpertClass::kPruned;
    const bool placed = pl.experts[static_cast<size_t>(e)].group >= 0;
    if (pruned && placed) invalid(lw + " expert " + std::to_string(e) + ": pruned but stored in a group");
    if (!pruned && !placed) invalid(lw + " expert " + std::to_string(e) + ": not pruned and in no group");
    if (!pruned) pl.survivors.push_back(static_cast<int32_t>(e));
  }
  if (static_cast<int64_t>(pl.survivors.size()) < c.top_k)
    invalid(lw + ": only " + std::to_string(pl.survivors.size()) + " experts survive pruning, top_k is " +
            std::to_string(c.top_k));
  return pl;
}

// The quantized non-expert matrices (`pack --attn-format`) as LinearOps, by
// source tensor name; each one's parts in manifest (= format part) order.
model::LinearOps quantized_linear_ops(const pack::Manifest& m, const model::ModelConfig& c,
                                      const io::Checkpoint& packed, const std::string& folder) {
  std::map<std::string, quant::PackedMatrix> by_source;
  std::vector<std::string> order;
  for (const pack::ManifestTensor& t : m.tensors) {
    if (t.kind != "quantized") continue;
    const std::string what = folder + ": tensor '" + t.name + "'";
    if (t.source.empty()) invalid(what + ": quantized tensor without a 'source' in manifest.json");
    const auto shape = model::expected_shape(c, t.source);
    if (!shape || t.source == "model.embed_tokens.weight")
      unsupported(what + ": quantized '" + t.source +
                  "' is not an attention projection, shared expert, dense MLP or lm_head; the executor cannot run it "
                  "quantized");
    const quant::FormatTraits& f = quant::format_by_name(t.format);
    auto [it, inserted] = by_source.try_emplace(t.source);
    quant::PackedMatrix& pm = it->second;
    if (inserted) {
      pm.format = &f;
      pm.rows = (*shape)[0];
      pm.cols = (*shape)[1];
      order.push_back(t.source);
    } else if (pm.format != &f) {
      invalid(what + ": format " + t.format + " differs from the other parts of '" + t.source + "' (" +
              std::string(pm.format->name) + ")");
    }
    const io::TensorInfo& info = packed.info(t.name);
    quant::PartView v;
    v.data = packed.view(t.name).data;
    v.dtype = info.dtype;
    v.shape = info.shape;
    v.nbytes = info.nbytes();
    pm.parts.push_back(std::move(v));
  }
  model::LinearOps ops;
  for (const std::string& name : order) {
    const quant::PackedMatrix& pm = by_source.at(name);
    quant::validate_packed(pm, folder + ": quantized '" + name + "' (" + std::string(pm.format->name) + ")");
    // Tied embeddings: the forward reads the embedding matrix for the logits,
    // whatever lm_head holds (as HF does), so a quantized lm_head is unused.
    if (name == "lm_head.weight" && c.tie_word_embeddings) continue;
    ops[name] = std::make_shared<PackedLinear>(pm);
  }
  return ops;
}

// The packed folder's config (what runs) against the manifest and, when
// given, the source checkpoint's config: the first differing field is named.
void check_configs(const pack::Manifest& m, const model::ModelConfig& packed, const std::string& folder,
                   const model::ModelConfig* source, const std::string& source_path) {
  auto manifest_field = [&](const char* name, int64_t in_manifest, int64_t in_config) {
    if (in_manifest != in_config)
      invalid(folder + "/config.json: '" + name + "' is " + std::to_string(in_config) + ", manifest.json source." +
              name + " says " + std::to_string(in_manifest));
  };
  if (m.source.model_type != packed.model_type)
    invalid(folder + "/config.json: model_type '" + packed.model_type + "', manifest.json source.model_type says '" +
            m.source.model_type + "'");
  manifest_field("num_layers", m.source.num_layers, packed.num_layers);
  manifest_field("num_experts", m.source.num_experts, packed.num_experts);
  manifest_field("hidden_size", m.source.hidden_size, packed.hidden_size);
  manifest_field("moe_intermediate_size", m.source.moe_intermediate_size, packed.moe_intermediate_size);
  if (!source) return;
  // Every parsed field, in the architecture-independent order of fields():
  // the first difference is named.
  const auto a = packed.fields(), b = source->fields();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i])
      invalid(source_path + "/config.json: field '" + b[i].first + "' is " + b[i].second + ", the packed model's " +
              folder + "/config.json says " + a[i].second + " (--model is not the checkpoint this folder was packed from)");
}

}  // namespace

PackedModel::~PackedModel() = default;

std::unique_ptr<PackedModel> PackedModel::open(const std::string& folder, const PackedModelOptions& options) {
  return open_with(folder, nullptr, options);
}

std::unique_ptr<PackedModel> PackedModel::open(const std::string& folder, const model::ModelConfig& config,
                                               const PackedModelOptions& options) {
  return open_with(folder, &config, options);
}

std::unique_ptr<PackedModel> PackedModel::open_with(const std::string& folder, const model::ModelConfig* config,
                                                    const PackedModelOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<PackedModel> pm(new PackedModel());
  pm->folder_ = folder;
  pm->model_path_ = options.model_path;
  pm->manifest_ = pack::load_manifest(folder);
  const pack::Manifest& m = pm->manifest_;
  if (!m.complete || !m.has_globals)
    invalid(folder + ": a partial pack (layers " + std::to_string(m.first_layer) + "-" + std::to_string(m.last_layer) +
            "); combine the parts with `expertquant merge` first");

  // The forward pass over the folder's own tensors and config.json.
  // Always, --no-verify too: config.json and the side files are small, and
  // an edited one runs or encodes as another model.
  if (const auto problems = pack::check_files(m, folder); !problems.empty()) invalid(problems.front());
  model::ModelCheckpoint packed = model::open_checkpoint(folder, config);
  const model::ModelConfig& c = packed.config;
  std::unique_ptr<model::Model> source;
  if (!options.model_path.empty()) {
    model::ModelOptions so = options.model_options;
    source = model::Model::open(options.model_path, so);
  }
  check_configs(m, c, folder, source ? &source->config() : nullptr, options.model_path);
  if (source) {
    const uint64_t fp = io::fingerprint_metadata(source->checkpoint(), model::kMaxConfigBytes).source_xxh64;
    if (fp != m.source.fingerprint)
      invalid(options.model_path + ": fingerprint " + hash_hex(fp) + " differs from the source of " + folder + " (" +
              hash_hex(m.source.fingerprint) + ", " + m.source.path + ")");
  }
  pm->stats_.verified_bytes = check_tensors(m, *packed.checkpoint, folder, options.verify);
  if (source) {
    const bool as_read = options.verify && options.verify_source_as_read;
    pm->stats_.verified_bytes +=
        check_source_data(m, source->checkpoint(), options.model_path, folder, options.verify && !as_read);
    if (as_read) pm->source_hashes_ = std::make_unique<io::HashesAsRead>(source->weights().source());
  }
  model::ModelOptions mo = options.model_options;
  mo.routed_experts = false;
  // Group parts and quantized matrices are read by their format only (an
  // nvfp4 part's F8 scales are not fp8 weights with block scales).
  auto opaque = std::make_shared<std::set<std::string>>();
  for (const pack::ManifestTensor& t : m.tensors)
    if (t.kind != "copy") opaque->insert(t.name);
  mo.opaque_tensors = [opaque](std::string_view name) { return opaque->count(std::string(name)) > 0; };
  mo.linear_ops = quantized_linear_ops(m, c, *packed.checkpoint, folder);
  std::shared_ptr<cuda::DenseWeights> dense_weights;
  if (options.dense_device == quant::Device::kCuda) {
    const io::Checkpoint& stored = *packed.checkpoint;
    cuda::DeviceDenseOps dense = cuda::device_dense_ops(
        c, [&](const std::string& name) { return stored.has(name) && !opaque->count(name); }, mo.linear_ops);
    mo.linear_ops.merge(dense.ops);
    dense_weights = dense.weights;
  }
  pm->model_ = std::make_unique<model::Model>(std::move(packed), mo);
  if (dense_weights) {
    dense_weights->store = &pm->model_->weights();
    // The layers whose attention matrices went to the GPU run there whole.
    pm->model_->set_layer_runner(cuda::make_device_layers(*pm->model_));
  }
  pm->reference_model_ = std::move(source);
  {
    const PackedModel* self = pm.get();
    auto release = [self](int64_t layer) { self->release_layer_pages(layer); };
    pm->model_->weights().set_release_hook(release);
    if (pm->reference_model_) pm->reference_model_->weights().set_release_hook(release);
  }
  const model::ModelConfig& cfg = pm->model_->config();
  const io::SourceTensors& tensors = pm->model_->weights().source();

  pm->dispatch_ = make_dispatch(DispatchKind::kSorted, 0);
  pm->blocks_.assign(static_cast<size_t>(cfg.num_layers), nullptr);
  for (const pack::ManifestLayer& ml : m.layers) {
    if (!ml.moe) continue;
    if (ml.layer < 0 || ml.layer >= cfg.num_layers || !cfg.layer_is_moe[static_cast<size_t>(ml.layer)])
      invalid(folder + ": manifest layer " + std::to_string(ml.layer) + " is not a MoE layer of the model");
    pm->layers_.push_back(build_layer(ml, cfg, tensors, folder));
  }
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    if (cfg.layer_is_moe[static_cast<size_t>(l)]) {
      bool found = false;
      for (const PackedLayer& pl : pm->layers_) found = found || pl.layer == l;
      if (!found) invalid(folder + ": MoE layer " + std::to_string(l) + " is missing from manifest.json");
    }
  for (const PackedLayer& pl : pm->layers_) {
    for (const BitGroup& g : pl.groups) pm->stats_.expert_bytes += g.bytes;
    auto block = std::make_unique<PackedMoeBlock>(cfg, pm->model_->weights(), pl, pm->dispatch_);
    pm->blocks_[static_cast<size_t>(pl.layer)] = block.get();
    pm->model_->set_moe_block(pl.layer, std::move(block));
  }
  pm->stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return pm;
}

uint64_t PackedModel::finish_source_verification() {
  if (!source_hashes_) return 0;
  io::TensorHashes got;
  for (const io::TensorHash& t : manifest_.source.tensors)
    if (t.full) got.push_back({t.name, t.sample, std::nullopt});
  source_hashes_->finish(got);
  const uint64_t hashed = source_hashes_->bytes_hashed_as_read() + source_hashes_->bytes_hashed_after();
  source_hashes_.reset();
  size_t i = 0;
  for (const io::TensorHash& t : manifest_.source.tensors) {
    if (!t.full) continue;
    const uint64_t h = *got[i++].full;
    if (h != *t.full)
      refuse_source(manifest_, model_path_, folder_, t.name, "xxh64 " + hash_hex(h), "xxh64 " + hash_hex(*t.full));
  }
  return hashed;
}

void PackedModel::release_layer_pages(int64_t layer) const {
  const io::Checkpoint& packed = model_->weights().checkpoint();
  for (const pack::ManifestTensor& t : manifest_.tensors)
    if (t.layer == layer) packed.shard_of(t.name).release(packed.info(t.name));
}

void PackedModel::drop_reference() {
  reference_ = false;
  source_hashes_.reset();  // observes the source: goes first
  reference_model_.reset();
  return_free_memory_to_os();
}

PackedMoeBlock& PackedModel::block(int64_t layer) {
  if (layer < 0 || layer >= static_cast<int64_t>(blocks_.size()) || !blocks_[static_cast<size_t>(layer)])
    invalid("packed model " + folder_ + ": layer " + std::to_string(layer) + " is not a MoE layer");
  return *blocks_[static_cast<size_t>(layer)];
}

void PackedModel::set_dispatch(std::shared_ptr<const Dispatch> dispatch) {
  dispatch_ = std::move(dispatch);
  for (PackedMoeBlock* b : blocks_)
    if (b) b->set_dispatch(dispatch_);
}

void PackedModel::set_mlp_kernel_thresholds(const MlpKernelThresholds& t) {
  for (PackedMoeBlock* b : blocks_)
    if (b) b->set_mlp_kernel_thresholds(t);
}

void PackedModel::use_reference(bool on) {
  if (on && !reference_model_)
    invalid("packed model " + folder_ +
            ": no unquantized model to compare against (loaded without --model; pass the source checkpoint)");
  reference_ = on;
}

}  // namespace eq::exec

// Writes a random-weight qwen3_moe checkpoint at real shapes, for full-size
// runs of profile, pack and eval (docs/benchmarks.md, "Full-size runs"). The
// default is Qwen3-30B-A3B's: 48 layers x 128 experts (top-8), hidden 2048,
// expert intermediate 768, GQA 32/4 heads of 128, and a byte vocabulary (256)
// so text works. Weights are bf16 draws of N(0, 1/sqrt(fan_in)) (an
// Irwin-Hall approximation, fast enough for tens of GB); the router's rows
// have log-normal norms (sigma --router-sigma) so routing is skewed the way
// trained routers are. One shard per layer plus one for the embedding, final
// norm and lm_head, with model.safetensors.index.json.
//
// --layers auto (the default) writes all 48 layers when the disk holds the
// source and a pack of it (4.5 bits per expert weight, attention as stored),
// else the first 24, and says which.
#include <CLI/CLI.hpp>

#include <sys/statvfs.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/numeric.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;

struct Shape {
  int64_t layers = 48, experts = 128, top_k = 8, hidden = 2048, inter = 768, heads = 32, kv_heads = 4,
          head_dim = 128, vocab = 256;
};

// splitmix64: independent streams per (tensor, block) from one seed.
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// n bf16 values of N(0, scale^2) (sum of four uniform bytes, centred and
// scaled to unit variance), filled in parallel blocks seeded by `stream`.
std::vector<uint16_t> random_bf16(int64_t n, float scale, uint64_t stream) {
  std::vector<uint16_t> out(static_cast<size_t>(n));
  constexpr int64_t kBlock = 1 << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Four bytes uniform on 0..255: mean 510, variance 4 (256^2 - 1) / 12.
  const float unit = scale / std::sqrt(4.0f * (256.0f * 256.0f - 1.0f) / 12.0f);
  eq::default_pool().run(static_cast<size_t>(blocks), [&](size_t b) {
    uint64_t s = stream * 0x2545F4914F6CDD1Dull + b;
    const int64_t lo = static_cast<int64_t>(b) * kBlock, hi = std::min(n, lo + kBlock);
    for (int64_t i = lo; i < hi; i += 2) {
      const uint64_t r = splitmix(s);
      for (int64_t j = 0; j < 2 && i + j < hi; ++j) {
        const uint64_t w = r >> (32 * j);
        const int sum = int(w & 255) + int((w >> 8) & 255) + int((w >> 16) & 255) + int((w >> 24) & 255);
        out[static_cast<size_t>(i + j)] = eq::f32_to_bf16(static_cast<float>(sum - 510) * unit);
      }
    }
  });
  return out;
}

std::vector<uint16_t> ones_bf16(int64_t n) { return std::vector<uint16_t>(static_cast<size_t>(n), eq::f32_to_bf16(1.0f)); }

// Router rows: random directions with log-normal norms.
std::vector<uint16_t> router_bf16(const Shape& s, float sigma, uint64_t stream) {
  const std::vector<uint16_t> dir = random_bf16(s.experts * s.hidden, 1.0f / std::sqrt(float(s.hidden)), stream);
  std::vector<uint16_t> out(dir.size());
  uint64_t st = stream ^ 0xA5A5A5A5ull;
  for (int64_t e = 0; e < s.experts; ++e) {
    // A standard normal from two uniforms (Box-Muller), then exp(sigma z).
    const double u1 = (double(splitmix(st) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = double(splitmix(st) >> 11) / 9007199254740992.0;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    const float norm = static_cast<float>(std::exp(sigma * z));
    for (int64_t i = 0; i < s.hidden; ++i) {
      const size_t k = static_cast<size_t>(e * s.hidden + i);
      out[k] = eq::f32_to_bf16(eq::bf16_to_f32(dir[k]) * norm);
    }
  }
  return out;
}

uint64_t layer_bytes(const Shape& s) {
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  const int64_t attn = q * s.hidden + 2 * kv * s.hidden + s.hidden * q + 2 * s.head_dim + 2 * s.hidden;
  return 2 * static_cast<uint64_t>(attn + s.experts * s.hidden + 3 * s.experts * s.inter * s.hidden);
}

uint64_t expert_bytes(const Shape& s) { return 2ull * 3 * s.experts * s.inter * s.hidden; }

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint16_t> data;
};

void write_shard(const fs::path& path, std::vector<Tensor>& tensors, nlohmann::ordered_json& weight_map) {
  std::vector<eq::io::TensorToWrite> w;
  for (const Tensor& t : tensors) {
    w.push_back({t.name, eq::DType::kBF16, t.shape,
                 std::span(reinterpret_cast<const uint8_t*>(t.data.data()), t.data.size() * 2)});
    weight_map[t.name] = path.filename().string();
  }
  eq::io::write_safetensors(path.string(), w);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/synth_checkpoint: a random-weight qwen3_moe checkpoint at real shapes"};
  Shape s;
  std::string out, layers_opt = "auto";
  float router_sigma = 1.0f;
  uint64_t seed = 1;
  bool force = false;
  app.add_option("out", out, "Output folder")->required();
  app.add_option("--layers", layers_opt, "Layers, or auto: 48 when the disk holds source + pack, else 24");
  app.add_option("--experts", s.experts, "Routed experts per layer (default 128)");
  app.add_option("--top-k", s.top_k, "Experts per token (default 8)");
  app.add_option("--hidden", s.hidden, "Hidden size (default 2048)");
  app.add_option("--inter", s.inter, "Expert intermediate size (default 768)");
  app.add_option("--heads", s.heads, "Attention heads (default 32)");
  app.add_option("--kv-heads", s.kv_heads, "Key/value heads (default 4)");
  app.add_option("--head-dim", s.head_dim, "Head dim (default 128)");
  app.add_option("--router-sigma", router_sigma, "Log-normal sigma of the router rows' norms (default 1)");
  app.add_option("--seed", seed, "Random seed (default 1)");
  app.add_flag("--force", force, "Replace an existing output folder");
  CLI11_PARSE(app, argc, argv);

  try {
    const fs::path dir(out);
    if (fs::exists(dir)) {
      if (!force) throw std::runtime_error(out + " exists (--force replaces it)");
      fs::remove_all(dir);
    }
    fs::create_directories(dir);
    const uint64_t per_layer = layer_bytes(s);
    if (layers_opt == "auto") {
      struct statvfs v {};
      if (statvfs(out.c_str(), &v) != 0) throw std::runtime_error(out + ": cannot read free space");
      const uint64_t free_bytes = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
      // The source plus a pack (experts at 4.5 of 16 bits, the rest as stored), 5% slack.
      auto need = [&](int64_t l) {
        return static_cast<uint64_t>(1.05 * double(l) * (double(per_layer) + double(per_layer) -
                                                          double(expert_bytes(s)) * (1.0 - 4.5 / 16.0)));
      };
      s.layers = need(48) <= free_bytes ? 48 : 24;
      std::printf("--layers auto: %lld layers (source + pack need %.1f GB for 48, %.1f GB free)\n",
                  (long long)s.layers, double(need(48)) / 1e9, double(free_bytes) / 1e9);
    } else {
      s.layers = std::stoll(layers_opt);
    }
    const int64_t H = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
    nlohmann::ordered_json cfg = {
        {"architectures", {"Qwen3MoeForCausalLM"}},
        {"model_type", "qwen3_moe"},
        {"vocab_size", s.vocab},
        {"hidden_size", H},
        {"intermediate_size", 6 * H},
        {"moe_intermediate_size", s.inter},
        {"num_hidden_layers", s.layers},
        {"num_attention_heads", s.heads},
        {"num_key_value_heads", s.kv_heads},
        {"head_dim", s.head_dim},
        {"num_experts", s.experts},
        {"num_experts_per_tok", s.top_k},
        {"norm_topk_prob", true},
        {"decoder_sparse_step", 1},
        {"mlp_only_layers", nlohmann::json::array()},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 1e6},
        {"max_position_embeddings", 32768},
        {"tie_word_embeddings", false},
        {"hidden_act", "silu"},
        {"torch_dtype", "bfloat16"}};
    std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";

    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    const int64_t shards = s.layers + 1;
    auto shard_name = [&](int64_t i) {
      char b[64];
      std::snprintf(b, sizeof b, "model-%05lld-of-%05lld.safetensors", (long long)i + 1, (long long)shards);
      return dir / b;
    };
    uint64_t stream = seed * 1000003ull, total = 0;
    const float h_scale = 1.0f / std::sqrt(float(H));
    for (int64_t l = 0; l < s.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<Tensor> t;
      t.push_back({p + "input_layernorm.weight", {H}, ones_bf16(H)});
      t.push_back({p + "post_attention_layernorm.weight", {H}, ones_bf16(H)});
      t.push_back({p + "self_attn.q_proj.weight", {q, H}, random_bf16(q * H, h_scale, ++stream)});
      t.push_back({p + "self_attn.k_proj.weight", {kv, H}, random_bf16(kv * H, h_scale, ++stream)});
      t.push_back({p + "self_attn.v_proj.weight", {kv, H}, random_bf16(kv * H, h_scale, ++stream)});
      t.push_back({p + "self_attn.o_proj.weight", {H, q}, random_bf16(H * q, 1.0f / std::sqrt(float(q)), ++stream)});
      t.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, ones_bf16(s.head_dim)});
      t.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, ones_bf16(s.head_dim)});
      t.push_back({p + "mlp.gate.weight", {s.experts, H}, router_bf16(s, router_sigma, ++stream)});
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
        t.push_back({ep + "gate_proj.weight", {s.inter, H}, random_bf16(s.inter * H, h_scale, ++stream)});
        t.push_back({ep + "up_proj.weight", {s.inter, H}, random_bf16(s.inter * H, h_scale, ++stream)});
        t.push_back({ep + "down_proj.weight", {H, s.inter},
                     random_bf16(H * s.inter, 1.0f / std::sqrt(float(s.inter)), ++stream)});
      }
      write_shard(shard_name(l), t, weight_map);
      total += fs::file_size(shard_name(l));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "\rlayer %lld/%lld  %.1f GB  %.0f MB/s", (long long)l + 1, (long long)s.layers,
                   double(total) / 1e9, double(total) / 1e6 / secs);
    }
    std::vector<Tensor> g;
    g.push_back({"model.embed_tokens.weight", {s.vocab, H}, random_bf16(s.vocab * H, 1.0f, ++stream)});
    g.push_back({"model.norm.weight", {H}, ones_bf16(H)});
    g.push_back({"lm_head.weight", {s.vocab, H}, random_bf16(s.vocab * H, h_scale, ++stream)});
    write_shard(shard_name(s.layers), g, weight_map);
    total += fs::file_size(shard_name(s.layers));
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::ofstream(dir / "model.safetensors.index.json") << index.dump(1) << "\n";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\n");
    std::printf("wrote %s: %lld layers x %lld experts, %.2f GB in %lld shards, %.1f s\n", out.c_str(),
                (long long)s.layers, (long long)s.experts, double(total) / 1e9, (long long)shards, secs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench/synth_checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}

// One MoE layer call (expert MLPs only: dispatch + gate/up/SwiGLU/down, no
// router or combine) at real layer shapes, per format mix, dispatch strategy
// and token count M, against the machine's ceilings measured in the same run
// (STREAM-style triad, Eigen fp32 GEMM). Layers: lib/exec/synthetic_layer.h
// (random codes at preset shapes; the shared qwen3moe-small layer quantized
// from its real weights). Routing: top-k distinct random experts per token
// over all experts, a different draw for every call, so the weights come from
// DRAM (not cache) whenever the layer exceeds L3.
//
//   effective GB/s = 1 ÷ median over calls of (time ÷ packed bytes of the distinct experts the call routes to)
//   GFLOP/s        = 2·3·H·I per token–slot pair (useful flops) ÷ median time
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/ceilings.h"
#include "exec/dispatch.h"
#include "exec/dispatch_cost.h"
#include "exec/runtime_config.h"
#include "exec/synthetic_layer.h"
#include "exec/timing.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

namespace {

using namespace eq;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Cell {
  std::string shape, mix, dispatch, fill;
  int64_t m = 0;
  exec::TimingStats t;
  double active_bytes = 0, flops = 0;
  // Median over calls of time ÷ that call's bytes: a mix's calls route to a
  // different byte count each (8 random experts of 8, 4 or 2 bits: ±10%), so
  // mean bytes ÷ median time would mix two statistics; for a uniform format
  // it equals median time ÷ bytes.
  double sec_per_byte = 0;
};

// The small shared model's layer: shape from its config, weights from its checkpoint.
struct RealLayer {
  std::unique_ptr<io::Checkpoint> ckpt;
  std::unique_ptr<io::SourceTensors> source_tensors;
  std::unique_ptr<model::WeightStore> store;
  model::ModelConfig config;
  exec::LayerShape shape;
  exec::ExpertSource source;
};

std::unique_ptr<RealLayer> open_real_layer(const std::string& folder, int64_t layer) {
  auto r = std::make_unique<RealLayer>();
  r->config = model::load_config(folder);
  r->ckpt = io::Checkpoint::open(folder);
  r->source_tensors = std::make_unique<io::SourceTensors>(*r->ckpt, r->config.source_quant);
  r->store = std::make_unique<model::WeightStore>(*r->source_tensors, false);
  const model::ModelConfig& c = r->config;
  r->shape = {"qwen3moe-small", c.num_experts, c.top_k, c.hidden_size, c.moe_intermediate_size};
  RealLayer* self = r.get();
  r->source = [self, layer](int64_t e, std::vector<float>& g, std::vector<float>& u, std::vector<float>& d) {
    const model::MlpWeights w = model::load_expert(*self->store, self->config, layer, e);
    g.assign(w.gate->data.begin(), w.gate->data.end());
    u.assign(w.up->data.begin(), w.up->data.end());
    d.assign(w.down->data.begin(), w.down->data.end());
  };
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/moe_layer: MoE layer expert-MLP time per format mix, dispatch and M, vs triad and Eigen"};
  std::string shapes_arg = "qwen3-30b-a3b,e512,qwen3moe-small", mixes_arg, dispatch_arg = "mask-combine,sorted,auto";
  std::string ms_arg = "1,8,64,512", small_model;
  int threads = 0, reps = 7, warmup = 1, small_layer = 0;
  double budget = 4.0, min_gb = 1.0;
  int64_t sort_cutoff = -1, decode_max_tokens = 0, small_batch_max_tokens = 0;
  uint64_t triad_mb = 256, seed = 42;
  bool json = false;
  app.add_option("--shapes", shapes_arg,
                 "Comma list: qwen3-30b-a3b, mixtral-8x7b, e512, deepseek-v3, glm-4.5, gpt-oss-120b, "
                 "qwen3-next-80b, qwen3moe-small, or all (default: qwen3-30b-a3b, e512, qwen3moe-small; mixtral-8x7b costs 360 "
                 "GFLOP per M=512 call, and the DeepSeek-V3, GLM-4.5, gpt-oss-120b and Qwen3-Next layers are "
                 "6, 2.5, 1.8 and 1.8 GB in fp4)");
  app.add_option("--mixes", mixes_arg, "Comma list of format mixes (default all: bf16,int8_row,fp4_g32,trellis2,"
                                       "trellis3,trellis4,mix842,mix842t,trellis2_lut,trellis3_lut,"
                                       "trellis4_lut,mix842tl), "
                                       "or any format name for that "
                                       "format alone (e.g. int2_g32)");
  app.add_option("--dispatch", dispatch_arg, "Comma list of dispatch strategies");
  app.add_option("--ms", ms_arg, "Comma list of token counts M per call");
  app.add_option("--threads", threads, "Worker threads (default: all cores)");
  app.add_option("--reps", reps, "Timed calls per cell at most (median, p90)");
  app.add_option("--warmup", warmup, "Untimed calls per cell");
  app.add_option("--budget", budget, "Seconds of timed calls per cell: fewer reps (never < 3) when a call is slow");
  app.add_option("--sort-cutoff", sort_cutoff, "auto's sort cutoff (default: the runtime config, as eval reads it)");
  app.add_option("--decode-max-tokens", decode_max_tokens, "Calls with M <= this use the decode kernel (mlp_kernel.h)");
  app.add_option("--small-batch-max-tokens", small_batch_max_tokens,
                 "Calls with decode-max-tokens < M <= this use the small-batch kernel (mlp_kernel.h)");
  app.add_option("--min-gb", min_gb,
                 "Independent copies of a layer until they hold at least this many GB, calls cycling through them "
                 "(so the weights exceed the L3 cache whatever the mix; 0 = one copy; in-cache shapes take one)");
  app.add_option("--triad-mb", triad_mb, "MiB per triad array (three arrays; keep >> L3)");
  app.add_option("--small-model", small_model, "qwen3moe-small folder (default $EQ_SHARED_DIR or /work/shared)");
  app.add_option("--small-layer", small_layer, "Layer of qwen3moe-small to use");
  app.add_option("--seed", seed, "Seed of the codes and routing");
  app.add_flag("--json", json, "Print JSON instead of the table");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) set_num_threads(threads);

  try {
    if (shapes_arg == "all") shapes_arg = "qwen3-30b-a3b,mixtral-8x7b,e512,deepseek-v3,glm-4.5,gpt-oss-120b,qwen3-next-80b,qwen3moe-small";
    std::vector<const exec::FormatMix*> mixes;
    if (mixes_arg.empty())
      for (const exec::FormatMix& m : exec::preset_format_mixes()) mixes.push_back(&m);
    for (const std::string& n : split(mixes_arg)) {
      const exec::FormatMix* m = exec::find_format_mix(n);
      if (!m) invalid("unknown mix '" + n + "'");
      mixes.push_back(m);
    }
    std::vector<exec::DispatchKind> kinds;
    for (const std::string& n : split(dispatch_arg)) {
      auto k = exec::parse_dispatch_kind(n);
      if (!k) invalid("unknown dispatch '" + n + "'");
      kinds.push_back(*k);
    }
    std::vector<int64_t> ms;
    for (const std::string& n : split(ms_arg)) ms.push_back(std::stoll(n));
    if (sort_cutoff < 0) sort_cutoff = exec::default_runtime_config().sort_cutoff;
    const exec::MlpKernelThresholds thresholds{decode_max_tokens, small_batch_max_tokens};
    if (small_model.empty()) {
      const char* env = std::getenv("EQ_SHARED_DIR");
      small_model = std::string(env ? env : "/work/shared") + "/models/qwen3moe-small";
    }

    const std::string load_before = load_average();
    const int pool_threads = default_pool().size();
    // The machine is often shared: the ceilings are measured before and after
    // the sweep and the better of the two is used (figures marked "start").
    eval::Ceiling triad = eval::triad_bandwidth(triad_mb << 20, 5);
    eval::Ceiling gemm = eval::eigen_gemm_peak(512, 768, 2048, 9);
    const eval::Ceiling triad_start = triad, gemm_start = gemm;
    if (!json)
      std::printf("cpu %s, isa %s, %d threads, load %s\ntriad %.1f GB/s (best of 5; median %.1f), 3 x %llu MiB (start of run)\n"
                  "eigen sgemm 512x768x2048 %.1f GFLOP/s (best of 9; median %.1f)\nsort_cutoff %lld, decode kernel "
                  "for M <= %lld, small-batch kernel for M <= %lld\n\n",
                  std::string(cpu_model_name()).c_str(), std::string(isa_name(active_isa())).c_str(), pool_threads,
                  load_before.c_str(), triad.best, triad.median, static_cast<unsigned long long>(triad_mb), gemm.best,
                  gemm.median, static_cast<long long>(sort_cutoff), static_cast<long long>(decode_max_tokens),
                  static_cast<long long>(small_batch_max_tokens));

    std::vector<Cell> cells;
    std::map<std::string, std::string> fills;
    std::map<std::string, double> layer_gb;
    std::map<std::string, int> layer_copies;
    for (const std::string& shape_name : split(shapes_arg)) {
      std::unique_ptr<RealLayer> real;
      exec::LayerShape shape;
      if (shape_name == "qwen3moe-small") {
        if (!std::ifstream(small_model + "/config.json")) {
          std::fprintf(stderr, "moe_layer: %s absent, skipping qwen3moe-small\n", small_model.c_str());
          continue;
        }
        real = open_real_layer(small_model, small_layer);
        shape = real->shape;
      } else {
        const exec::LayerShape* s = exec::find_layer_shape(shape_name);
        if (!s) invalid("unknown shape '" + shape_name + "'");
        shape = *s;
      }
      // Shared experts are dispatched as experts every token routes to.
      const int64_t H = shape.hidden, I = shape.intermediate, K = shape.top_k + shape.shared_experts;
      for (const exec::FormatMix* mix : mixes) {
        // Copies with their own codes (the random presets) so that a run of
        // calls reads min_gb of distinct weights: a layer smaller than L3
        // would otherwise be served from cache after a few calls.
        std::vector<std::unique_ptr<exec::SyntheticLayer>> copies;
        copies.push_back(exec::make_synthetic_layer(shape, *mix, seed, real ? real->source : exec::ExpertSource{}));
        const double one_gb = static_cast<double>(copies.front()->packed_bytes()) / 1e9;
        const int n_copies = real ? 1 : std::max(1, static_cast<int>(std::ceil(min_gb / one_gb)));
        for (int c = 1; c < n_copies; ++c)
          copies.push_back(exec::make_synthetic_layer(shape, *mix, seed + 1000003ull * c, exec::ExpertSource{}));
        const exec::SyntheticLayer* layer = copies.front().get();
        const std::string key = shape.name + "/" + mix->name;
        fills[key] = layer->fill();
        layer_gb[key] = one_gb;
        layer_copies[key] = n_copies;
        if (!json)
          std::fprintf(stderr, "%s: %.3f GB packed x %d copies, %zu groups, %s\n", key.c_str(), one_gb, n_copies,
                       layer->layer().groups.size(), layer->fill().c_str());
        auto layer_of_call = [&](size_t r) -> const exec::PackedLayer& { return copies[r % copies.size()]->layer(); };
        for (int64_t M : ms) {
          // The same routing draws for every mix and dispatch of this shape and M.
          std::vector<std::vector<int32_t>> routings;
          std::vector<double> bytes;
          for (int r = 0; r < warmup + reps; ++r) {
            routings.push_back(exec::with_shared_experts(
                exec::random_expert_ids(shape.experts, shape.top_k, M, seed * 7919 + M * 104729 + r), shape));
            std::vector<char> seen(static_cast<size_t>(shape.experts + shape.shared_experts), 0);
            double b = 0;
            for (int32_t e : routings.back())
              if (!seen[e]++) b += static_cast<double>(exec::expert_bytes(layer_of_call(routings.size() - 1).expert(e)));
            bytes.push_back(b);
          }
          std::vector<float> x(static_cast<size_t>(M * H));
          for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
          model::FloatBuffer out(static_cast<size_t>(M * K * H));
          for (exec::DispatchKind kind : kinds) {
            auto dispatch = exec::make_dispatch(kind, sort_cutoff);
            exec::DispatchScratch scratch;
            auto call = [&](size_t r) {
              exec::MoeWork w{&layer_of_call(r), x.data(), M, H, K, routings[r].data(), out.data()};
              w.kernel = exec::select_mlp_kernel(M, thresholds);
              dispatch->run(w, scratch);
            };
            double warm = 0;
            for (int r = 0; r < warmup; ++r) {
              const auto t0 = std::chrono::steady_clock::now();
              call(static_cast<size_t>(r));
              warm = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            }
            const int n = warm > 0 ? std::clamp(static_cast<int>(budget / warm), std::min(3, reps), reps) : reps;
            std::vector<double> t, per_byte;
            double b = 0;
            for (int r = 0; r < n; ++r) {
              const auto t0 = std::chrono::steady_clock::now();
              call(static_cast<size_t>(warmup + r));
              t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
              b += bytes[static_cast<size_t>(warmup + r)];
              per_byte.push_back(t.back() / bytes[static_cast<size_t>(warmup + r)]);
            }
            Cell c{shape.name, mix->name, std::string(exec::dispatch_kind_name(kind)), layer->fill(), M,
                   exec::summarize_times(t), b / n, 6.0 * H * I * M * K, exec::summarize_times(per_byte).median};
            if (!json)
              std::printf("%-15s %-9s %-13s M=%-4lld %10.3f ms (p90 %8.3f, n=%d) %7.2f GB/s = %5.1f%% triad  "
                          "%7.1f GFLOP/s = %5.1f%% eigen\n",
                          c.shape.c_str(), c.mix.c_str(), c.dispatch.c_str(), static_cast<long long>(M),
                          c.t.median * 1e3, c.t.p90 * 1e3, c.t.reps, 1 / c.sec_per_byte / 1e9,
                          100 / c.sec_per_byte / 1e9 / triad.best, c.flops / c.t.median / 1e9,
                          100 * c.flops / c.t.median / 1e9 / gemm.best);
            std::fflush(stdout);
            cells.push_back(std::move(c));
          }
        }
      }
    }

    {
      const eval::Ceiling t = eval::triad_bandwidth(triad_mb << 20, 5), g = eval::eigen_gemm_peak(512, 768, 2048, 9);
      if (t.best > triad.best) triad = t;
      if (g.best > gemm.best) gemm = g;
      if (!json)
        std::printf("\nend of run: triad %.1f GB/s, eigen %.1f GFLOP/s; ratios above use the start figures, the "
                    "JSON the better of the two\n",
                    t.best, g.best);
    }
    // Derived figures: mask-combine ÷ sorted, and the mixed-bits target
    // (mixed sorted ≤ 1.05 × fp4_g32 sorted × mixed bytes ÷ fp4 bytes), per
    // byte of each call (Cell::sec_per_byte).
    auto find = [&](const std::string& s, const std::string& mix, const std::string& d, int64_t m) -> const Cell* {
      for (const Cell& c : cells)
        if (c.shape == s && c.mix == mix && c.dispatch == d && c.m == m) return &c;
      return nullptr;
    };
    nlohmann::ordered_json derived = nlohmann::ordered_json::array();
    for (const Cell& c : cells) {
      if (c.dispatch != "sorted") continue;
      nlohmann::ordered_json d{{"shape", c.shape}, {"mix", c.mix}, {"m", c.m}};
      if (const Cell* mc = find(c.shape, c.mix, "mask-combine", c.m)) d["mask_combine_over_sorted"] = mc->t.median / c.t.median;
      const Cell* u = find(c.shape, "fp4_g32", "sorted", c.m);
      if (u && c.mix.rfind("mix", 0) == 0) {
        const double ratio = c.sec_per_byte / u->sec_per_byte;
        d["mixed_over_bytes_scaled_fp4"] = ratio;
        d["mixed_target_met"] = ratio <= 1.05;
      }
      derived.push_back(d);
    }
    const std::string load_after = load_average();

    if (json) {
      nlohmann::ordered_json j;
      j["bench"] = "moe_layer";
      j["command"] = [&] {
        std::string s;
        for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
        return s;
      }();
      j["machine"] = {{"cpu", cpu_model_name()}, {"isa", isa_name(active_isa())}, {"threads", pool_threads},
                      {"load_before", load_before}, {"load_after", load_after}};
      j["ceilings"] = {{"triad_gbs", triad.best}, {"triad_gbs_median", triad.median},
                       {"triad_gbs_start", triad_start.best}, {"eigen_gflops_start", gemm_start.best},
                       {"triad_array_mib", triad_mb}, {"eigen_sgemm", "512x768x2048"},
                       {"eigen_gflops", gemm.best}, {"eigen_gflops_median", gemm.median}};
      j["settings"] = {{"sort_cutoff", sort_cutoff}, {"decode_max_tokens", decode_max_tokens},
                       {"small_batch_max_tokens", small_batch_max_tokens},
                       {"reps_max", reps}, {"warmup", warmup}, {"budget_s", budget}, {"seed", seed},
                       {"min_gb", min_gb}};
      j["layers"] = nlohmann::ordered_json::object();
      for (const auto& [k, f] : fills) j["layers"][k] = {{"fill", f}, {"packed_gb", layer_gb[k]}, {"copies", layer_copies[k]}};
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const Cell& c : cells) {
        const double gbs = 1 / c.sec_per_byte / 1e9, gf = c.flops / c.t.median / 1e9;
        rows.push_back({{"shape", c.shape}, {"mix", c.mix}, {"dispatch", c.dispatch}, {"m", c.m},
                        {"median_ms", c.t.median * 1e3}, {"p90_ms", c.t.p90 * 1e3}, {"reps", c.t.reps},
                        {"active_bytes", c.active_bytes}, {"gbs", gbs}, {"triad_ratio", gbs / triad.best},
                        {"gflops", gf}, {"eigen_ratio", gf / gemm.best}});
      }
      j["results"] = rows;
      j["derived"] = derived;
      std::printf("%s\n", j.dump(1).c_str());
    } else {
      std::printf("\nmask-combine / sorted, mixed sorted / (fp4_g32 sorted x bytes ratio) [target <= 1.05]\n");
      for (const auto& d : derived) {
        std::printf("%-15s %-9s M=%-4lld", d["shape"].get<std::string>().c_str(), d["mix"].get<std::string>().c_str(),
                    static_cast<long long>(d["m"].get<int64_t>()));
        if (d.contains("mask_combine_over_sorted")) std::printf("  mc/sorted %5.2fx", d["mask_combine_over_sorted"].get<double>());
        if (d.contains("mixed_over_bytes_scaled_fp4"))
          std::printf("  mixed/scaled-fp4 %5.2f %s", d["mixed_over_bytes_scaled_fp4"].get<double>(),
                      d["mixed_target_met"].get<bool>() ? "met" : "MISSED");
        std::printf("\n");
      }
      std::printf("load before %s, after %s\n", load_before.c_str(), load_after.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench/moe_layer: %s\n", e.what());
    return 1;
  }
  return 0;
}

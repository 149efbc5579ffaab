// expertquant inspect PATH: what a checkpoint holds.
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/shape.h"
#include "format_util.h"
#include "model/summary.h"

namespace eq::app {

namespace {
struct InspectOptions {
  std::string path;
  bool json = false;
  bool tensors = false;
};

void print_table(const nlohmann::ordered_json& s, bool tensors) {
  std::printf("checkpoint  %s\n", s["path"].get<std::string>().c_str());
  if (s.contains("architecture")) {
    const auto& a = s["architecture"];
    std::printf("model_type  %s\n", a["model_type"].get<std::string>().c_str());
    std::printf("layers      %lld (%lld MoE) x %lld experts, top-%lld\n", a["layers"].get<long long>(),
                a["moe_layers"].get<long long>(), a["experts"].get<long long>(), a["top_k"].get<long long>());
    std::printf("hidden      %lld, expert intermediate %lld, heads %lld/%lld (head_dim %lld), vocab %lld\n",
                a["hidden_size"].get<long long>(), a["expert_intermediate_size"].get<long long>(),
                a["heads"].get<long long>(), a["kv_heads"].get<long long>(), a["head_dim"].get<long long>(),
                a["vocab_size"].get<long long>());
  } else {
    std::printf("model_type  (no config.json: tensors only)\n");
  }
  if (s.contains("source_quantization"))
    std::printf("quantized   %s\n", s["source_quantization"]["method"].get<std::string>().c_str());
  std::printf("\n%-18s %16s %12s %8s  %s\n", "part", "parameters", "bytes", "share", "stored as");
  const auto& p = s["parameters"];
  const double total = static_cast<double>(p["total"]["parameters"].get<uint64_t>());
  for (const char* k : {"routed_experts", "shared_experts", "attention", "embeddings_head", "norms_router",
                        "dense_mlp", "other", "total"}) {
    const uint64_t n = p[k]["parameters"].get<uint64_t>();
    if (n == 0 && std::string(k) != "total") continue;
    std::string stored;
    if (s.contains("source_quantization") && s["source_quantization"].contains("stored") &&
        s["source_quantization"]["stored"].contains(k))
      for (const auto& kind : s["source_quantization"]["stored"][k])
        stored += (stored.empty() ? "" : ", ") + kind.get<std::string>();
    std::printf("%-18s %16s %12s %7.2f%%  %s\n", k, with_commas(n).c_str(),
                human_bytes(static_cast<double>(p[k]["bytes"].get<uint64_t>())).c_str(),
                total > 0 ? 100.0 * static_cast<double>(n) / total : 0.0, stored.c_str());
  }
  std::printf("\ndtypes     ");
  for (auto it = s["dtypes"].begin(); it != s["dtypes"].end(); ++it)
    std::printf(" %s x%llu", it.key().c_str(), it.value().get<unsigned long long>());
  std::printf("\nshards      %zu\n", s["shards"].size());
  for (const auto& sh : s["shards"])
    std::printf("  %-40s %12s %6llu tensors\n", sh["file"].get<std::string>().c_str(),
                human_bytes(static_cast<double>(sh["bytes"].get<uint64_t>())).c_str(),
                sh["tensors"].get<unsigned long long>());
  if (tensors) {
    std::printf("\n");
    for (const auto& t : s["tensors"]) {
      const std::string shape = shape_str(t["shape"].get<std::vector<int64_t>>());
      std::printf("%-60s %-8s %-18s %s\n", t["name"].get<std::string>().c_str(),
                  t["dtype"].get<std::string>().c_str(), shape.c_str(), t["shard"].get<std::string>().c_str());
    }
  }
}
}  // namespace

Command add_inspect(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "Summarize a checkpoint: architecture, experts, parameter and byte counts");
  sub->add_option("path", opt->path, "Checkpoint folder (config.json + safetensors) or a .safetensors file")->required();
  sub->add_flag("--json", opt->json, "Print machine-readable JSON on stdout");
  sub->add_flag("--tensors", opt->tensors, "List every tensor (name, dtype, shape, shard)");
  return {sub, [opt] {
            auto s = model::summarize_checkpoint(opt->path, opt->tensors);
            if (opt->json)
              std::cout << s.dump(2) << "\n";
            else
              print_table(s, opt->tensors);
            return 0;
          }};
}

}  // namespace eq::app

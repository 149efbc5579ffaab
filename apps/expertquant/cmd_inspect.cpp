// expertquant inspect PATH: what a checkpoint (model/summary) or a packed
// folder (pack/summary) holds.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/shape.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "model/describe.h"
#include "model/summary.h"
#include "pack/summary.h"

namespace eq::app {

namespace {
struct InspectOptions {
  std::string path;
  JsonOutput json;
  bool tensors = false;
};

void print_table(const nlohmann::ordered_json& s, bool tensors) {
  std::printf("checkpoint  %s\n", s["path"].get<std::string>().c_str());
  if (s.contains("architecture")) {
    for (const std::string& line : model::describe_architecture(s["architecture"])) std::printf("%s\n", line.c_str());
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

using Json = nlohmann::ordered_json;

std::string class_counts_text(const Json& c) {
  char b[96];
  std::snprintf(b, sizeof b, "%5lld %5lld %5lld %5lld", c["critical"].get<long long>(), c["standard"].get<long long>(),
                c["deprioritized"].get<long long>(), c["pruned"].get<long long>());
  return b;
}

std::string bits_text(const Json& b) {
  char t[96];
  std::snprintf(t, sizeof t, "%.3f (%.3f + %.3f)", b["total"].get<double>(), b["payload"].get<double>(),
                b["overhead"].get<double>());
  return t;
}

std::string share_text(uint64_t part, uint64_t whole) {
  char t[32];
  std::snprintf(t, sizeof t, "%.1f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return t;
}

void print_packed(const Json& s) {
  const Json& d = s["dims"];
  const Json& pol = s["policy"];
  std::printf("packed      %s (expertquant %s)\n", s["path"].get<std::string>().c_str(),
              s["tool_version"].get<std::string>().c_str());
  std::printf("model_type  %s, packed from %s\n", s["model_type"].get<std::string>().c_str(),
              s["source"].get<std::string>().c_str());
  std::printf("dims        %lld layers x %lld experts, hidden %lld, expert intermediate %lld\n",
              d["layers"].get<long long>(), d["experts"].get<long long>(), d["hidden_size"].get<long long>(),
              d["moe_intermediate_size"].get<long long>());
  std::string policy = pol["kind"].get<std::string>();
  if (pol.contains("uniform_format")) policy += " " + pol["uniform_format"].get<std::string>();
  policy += "; attention " + (pol["attn_format"].is_null() ? std::string("as stored") : pol["attn_format"].get<std::string>());
  policy += "; shared experts " +
            (pol["shared_format"].is_null() ? std::string("as stored") : pol["shared_format"].get<std::string>());
  policy += "; dense MLPs " +
            (pol["dense_format"].is_null() ? std::string("as stored") : pol["dense_format"].get<std::string>());
  std::printf("policy      %s\n", policy.c_str());
  std::printf("layers      %lld-%lld%s\n", s["layer_range"]["first"].get<long long>(),
              s["layer_range"]["last"].get<long long>(), s["complete"].get<bool>() ? " (complete)" : " (a part, for merge)");

  std::printf("\n%-6s %5s %5s %5s %5s %6s  %-25s %s\n", "layer", "crit", "std", "depr", "prun", "groups",
              "bits/w (payload + over.)", "formats (experts)");
  for (const Json& l : s["layers"]) {
    std::string formats;
    for (auto it = l["formats"].begin(); it != l["formats"].end(); ++it)
      formats += (formats.empty() ? "" : ", ") + it.key() + " x" + std::to_string(it.value().get<long long>());
    std::printf("%-6lld %s %6zu  %-25s %s\n", l["layer"].get<long long>(), class_counts_text(l["class_counts"]).c_str(),
                l["groups"].size(), bits_text(l["bits_per_weight"]).c_str(), formats.c_str());
  }
  std::printf("%-6s %s %6llu  %s\n", "total", class_counts_text(s["class_counts"]).c_str(),
              s["groups"].get<unsigned long long>(), bits_text(s["bits_per_weight"]).c_str());

  std::printf("\n%-14s %7s %6s %12s  %s\n", "format", "experts", "groups", "bytes", "bits/w (payload + overhead)");
  for (const Json& f : s["formats"])
    std::printf("%-14s %7lld %6lld %12s  %s\n", f["format"].get<std::string>().c_str(), f["experts"].get<long long>(),
                f["groups"].get<long long>(), human_bytes(double(f["bytes"].get<uint64_t>())).c_str(),
                bits_text(f["bits_per_weight"]).c_str());
  std::printf("bits/weight %.3f per kept expert weight; %.3f with pruned experts as 0 bits\n",
              s["bits_per_weight"]["total"].get<double>(), s["avg_bits_per_expert_weight"].get<double>());

  const Json& z = s["sizes"];
  auto bytes = [&](const char* k) { return z[k].get<uint64_t>(); };
  std::printf("\non disk     %s (shards %s, manifest %s, config and side files %s)\n",
              human_bytes(double(bytes("on_disk_bytes"))).c_str(), human_bytes(double(bytes("shard_bytes"))).c_str(),
              human_bytes(double(bytes("manifest_bytes"))).c_str(), human_bytes(double(bytes("side_file_bytes"))).c_str());
  std::printf("tensors     %s, source %s (%s)\n", human_bytes(double(bytes("tensor_bytes"))).c_str(),
              human_bytes(double(bytes("source_tensor_bytes"))).c_str(),
              share_text(bytes("tensor_bytes"), bytes("source_tensor_bytes")).c_str());
  std::printf("experts     %s, source %s (%s)\n", human_bytes(double(bytes("expert_bytes"))).c_str(),
              human_bytes(double(bytes("source_expert_bytes"))).c_str(),
              share_text(bytes("expert_bytes"), bytes("source_expert_bytes")).c_str());
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Summarize a checkpoint (architecture, experts, parameter and byte counts) or a packed folder "
                 "(formats, classes, groups, bits per weight, sizes)");
  sub->add_option("path", opt->path,
                  "Checkpoint folder (config.json + safetensors), a .safetensors file, or a packed folder "
                  "(manifest.json)")
      ->required();
  add_json_options(sub, opt->json, "the summary");
  sub->add_flag("--tensors", opt->tensors, "List every tensor (name, dtype, shape, shard; checkpoints)");
  return {sub, [opt] {
            io::check_outputs_apart({opt->json.output()}, {{"path", opt->path}});
            const bool packed = pack::is_packed(opt->path);
            if (packed && opt->tensors)
              invalid("--tensors: " + opt->path + " is a packed folder; its tensors are listed in its manifest.json");
            const Json s = packed ? pack::summarize_packed(opt->path)
                                  : model::summarize_checkpoint(opt->path, opt->tensors);
            if (!opt->json.print) {
              if (packed)
                print_packed(s);
              else
                print_table(s, opt->tensors);
            }
            if (opt->json.wanted()) emit_json(opt->json, s);
            return 0;
          }};
}

}  // namespace eq::app

// expertquant merge PART... -o OUT: assemble --layers partial packs (lib/pack/merge).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/memory.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "pack/merge.h"

namespace eq::app {

namespace {
struct MergeCliOptions {
  pack::MergeRequest request;
  std::string shard_size;
  JsonOutput json;
};
}  // namespace

Command add_merge(CLI::App& app) {
  auto o = std::make_shared<MergeCliOptions>();
  CLI::App* sub = app.add_subcommand("merge", "Assemble packed parts made with pack --layers into one packed folder");
  sub->add_option("parts", o->request.inputs, "Packed part folders")->required();
  sub->add_option("-o,--out", o->request.out_path, "Output folder")->required();
  sub->add_option("--shard-size", o->shard_size, "Maximum bytes per output shard (default: the parts')");
  sub->add_flag("--force", o->request.force, "Replace an existing output folder");
  add_json_options(sub, o->json, "a summary");
  return {sub, [o] {
            std::vector<io::NamedPath> parts;
            for (const auto& p : o->request.inputs) parts.push_back({"part", p});
            io::check_outputs_apart({{"-o", o->request.out_path}, o->json.output()}, parts);
            if (!o->shard_size.empty()) o->request.shard_size = parse_byte_size(o->shard_size, "--shard-size");
            const pack::Manifest m = pack::run_merge(o->request);
            if (!o->json.print)
              std::printf("merged %zu part(s), %zu layers, %zu tensors into %s (%zu shard(s), %s)\n",
                          o->request.inputs.size(), m.layers.size(), m.tensors.size(), o->request.out_path.c_str(),
                          m.shards.size(), human_bytes(double(m.file_bytes)).c_str());
            if (o->json.wanted())
              emit_json(o->json, {{"output", o->request.out_path}, {"totals", pack::manifest_to_json(m)["totals"]}});
            return 0;
          }};
}

}  // namespace eq::app

// expertquant verify OUT: re-read a packed folder against its manifest (lib/pack/verify).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "format_util.h"
#include "io/output_path.h"
#include "json_output.h"
#include "option_checks.h"
#include "pack/verify.h"

namespace eq::app {

namespace {
struct VerifyCliOptions {
  std::string folder;
  int samples = 2;
  JsonOutput json;
};
}  // namespace

Command add_verify(CLI::App& app) {
  auto o = std::make_shared<VerifyCliOptions>();
  CLI::App* sub = app.add_subcommand("verify", "Check a packed folder's sizes and checksums against its manifest");
  sub->add_option("folder", o->folder, "Packed model folder")->required();
  sub->add_option("--samples", o->samples, "Experts per group to dequantize and check for finite values (default 2)")
      ->check(integer_in(0, 1'000'000));
  add_json_options(sub, o->json, "the report");
  return {sub, [o] {
            io::check_outputs_apart({o->json.output()}, {{"folder", o->folder}});
            const pack::VerifyReport r = pack::verify_packed(o->folder, o->samples);
            if (!o->json.print) {
              for (const auto& p : r.problems) std::printf("FAIL %s\n", p.c_str());
              std::printf("%s: %llu shard(s), %llu tensors, %llu experts, %s checked, %llu matrices dequantized: %s\n",
                          o->folder.c_str(), (unsigned long long)r.shards, (unsigned long long)r.tensors,
                          (unsigned long long)r.experts, human_bytes(double(r.bytes)).c_str(),
                          (unsigned long long)r.sampled_matrices,
                          r.ok() ? "OK" : (std::to_string(r.problems.size()) + " problem(s)").c_str());
            }
            if (o->json.wanted())
              emit_json(o->json, {{"folder", o->folder}, {"ok", r.ok()}, {"shards", r.shards}, {"tensors", r.tensors},
                                  {"experts", r.experts}, {"bytes", r.bytes},
                                  {"sampled_matrices", r.sampled_matrices}, {"problems", r.problems}});
            return r.ok() ? 0 : 1;
          }};
}

}  // namespace eq::app

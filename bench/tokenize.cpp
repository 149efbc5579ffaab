// Tokenizer speed (lib/tokenizer): for each vendored reference tokenizer,
//   - load: seconds to read its tokenizer.json (+ tokenizer_config.json),
//     uncompressed as a model folder holds it;
//   - encode: MB/s (1e6 bytes) on one core for each text, with the JavaScript
//     port of the reference tokenizer on the same texts in the same run when
//     --node-modules is given (column "x node"; token counts compared);
//   - threads: MB/s encoding a large text (--large-file, or the texts
//     repeated to --large-mib) as `profile --calib` does, as one document and
//     cut into documents at blank lines, at 1, 2, 4 .. cores.
// Median of --reps runs. Run from the repository root:
//   build/bench/tokenize [--reps 5] [--large-mib 16] [--node-modules /tmp/tok/node_modules] [--json out.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "io/text_file.h"
#include "tokenizer/text_documents.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The same with `setup` before each run, untimed.
template <class S, class F>
double median_seconds(int reps, S&& setup, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    setup();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Text {
  std::string name, path, bytes;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Runs bench/tokenize_node.mjs; its JSON, or null when node failed.
nlohmann::json run_node(const std::string& modules, int reps, const std::vector<std::string>& dirs,
                        const std::vector<Text>& texts) {
  std::string cmd = "node bench/tokenize_node.mjs " + quote(modules) + " " + std::to_string(reps);
  for (const auto& d : dirs) cmd += " " + quote(d);
  cmd += " --";
  for (const auto& t : texts) cmd += " " + quote(t.path);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "tokenize: %s failed\n", cmd.c_str());
    return nullptr;
  }
  return nlohmann::json::parse(out, nullptr, false);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenizer load and encode speed"};
  std::string root = "tests/data/tokenizers", node_modules, json_out, large_file;
  std::vector<std::string> names = {"qwen3", "deepseek_v3", "gptoss", "llama2"};
  std::vector<std::string> text_paths = {"data/corpus/eval_prose.txt.zst", "data/corpus/eval_python.txt.zst",
                                         "data/corpus/eval_c.txt.zst", "data/corpus/eval_troff.txt.zst"};
  int reps = 5;
  double large_mib = 16;
  app.add_option("--tokenizers", root, "folder of tokenizer folders (tokenizer.json.zst, tokenizer_config.json)");
  app.add_option("--names", names, "tokenizer folders to measure")->delimiter(',');
  app.add_option("--texts", text_paths, "texts to encode (.zst accepted)");
  app.add_option("--reps", reps, "runs per figure (median)")->check(CLI::Range(1, 1000));
  app.add_option("--large-mib", large_mib, "size of the one-document text of the threads figure (0: skip)")
      ->check(CLI::Range(0.0, 4096.0));
  app.add_option("--large-file", large_file, "the large text of the threads figure (default: the texts repeated)");
  app.add_option("--node-modules", node_modules, "node_modules holding @lenml/tokenizers: adds the x node column");
  app.add_option("--json", json_out, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);

  std::vector<Text> texts;
  for (const auto& p : text_paths) texts.push_back({fs::path(p).filename().replace_extension().string(), p, eq::io::read_file_bytes(p)});
  // The large text: --large-file, or the texts repeated to --large-mib.
  std::string large;
  if (!large_file.empty()) {
    large = eq::io::read_file_bytes(large_file);
  } else if (large_mib > 0) {
    const size_t want = static_cast<size_t>(large_mib * 1048576.0);
    while (large.size() < want)
      for (const Text& t : texts) large += t.bytes;
  }
  std::vector<std::string> dirs;
  for (const auto& n : names) dirs.push_back((fs::path(root) / n).string());

  nlohmann::json node = node_modules.empty() ? nlohmann::json(nullptr) : run_node(node_modules, reps, dirs, texts);
  nlohmann::json report = {{"reps", reps}, {"hardware_threads", eq::hardware_threads()}, {"tokenizers", nlohmann::json::object()}};

  const fs::path tmp = fs::temp_directory_path() / ("eq-bench-tokenize-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string json_path = (tmp / (names[k] + ".json")).string();
    {
      const std::string plain = eq::io::read_file_bytes(dirs[k] + "/tokenizer.json.zst");
      std::ofstream(json_path, std::ios::binary) << plain;
    }
    const std::string config = dirs[k] + "/tokenizer_config.json";
    std::unique_ptr<eq::tokenizer::Tokenizer> tok;
    const auto load = [&] { tok = eq::tokenizer::load_tokenizer_file(json_path, config); };
    const double load_s = median_seconds(reps, load);
    const double json_mb = double(fs::file_size(json_path)) / 1e6;
    nlohmann::json& row = report["tokenizers"][names[k]];
    row["tokenizer_json_mb"] = json_mb;
    row["load_s"] = load_s;
    std::printf("\n%s: tokenizer.json %.1f MB, vocab %lld, load %.3f s\n", names[k].c_str(), json_mb,
                static_cast<long long>(tok->vocab_size()), load_s);
    std::printf("  %-12s %10s %10s %10s %8s\n", "text", "tokens", "MB/s/core", "node MB/s", "x node");

    eq::set_num_threads(1);
    for (const Text& t : texts) {
      std::vector<int32_t> ids;
      // A fresh tokenizer each run: its word cache starts empty, as for a text never seen.
      const double s = median_seconds(reps, load, [&] { ids = tok->encode(t.bytes, false); });
      const double mbps = double(t.bytes.size()) / 1e6 / s;
      nlohmann::json cell = {{"bytes", t.bytes.size()}, {"tokens", ids.size()}, {"mbps_per_core", mbps}};
      std::printf("  %-12s %10zu %10.2f", t.name.c_str(), ids.size(), mbps);
      if (node.is_object() && node.contains(names[k]) && node[names[k]].contains(t.name)) {
        const auto& n = node[names[k]][t.name];
        const double node_mbps = n["mbps"].get<double>();
        const bool same = n["tokens"].get<size_t>() == ids.size();
        cell["node_mbps"] = node_mbps;
        cell["node_tokens_equal"] = same;
        std::printf(" %10.2f %7.1fx%s", node_mbps, mbps / node_mbps, same ? "" : "  (token counts differ)");
      }
      std::printf("\n");
      row["texts"][t.name] = cell;
    }

    if (!large.empty()) {
      // As profile --calib reads it: the whole file as one document (its words
      // spread over the cores), and cut into documents at blank lines.
      for (const std::string& separator : {std::string(), std::string("\n\n")}) {
        const char* mode = separator.empty() ? "one_document" : "blank_line_documents";
        std::printf("  %.1f MB, %s:", double(large.size()) / 1e6,
                    separator.empty() ? "one document" : "documents at blank lines");
        double one = 0;
        for (int threads = 1;; threads *= 2) {
          const int n = std::min(threads, eq::hardware_threads());
          eq::set_num_threads(n);
          const double s = median_seconds(std::max(1, reps / 2), load, [&] {
            (void)eq::tokenizer::encode_documents(large, *tok, {.separator = separator});
          });
          const double mbps = double(large.size()) / 1e6 / s;
          if (n == 1) one = mbps;
          row["threads"][mode][std::to_string(n)] = mbps;
          std::printf("  %d core%s %.2f MB/s (%.2fx)", n, n == 1 ? "" : "s", mbps, mbps / one);
          if (n == eq::hardware_threads()) break;
        }
        std::printf("\n");
      }
    }
    fs::remove(json_path);
  }
  fs::remove_all(tmp);
  if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
}

// One convention for machine output across every subcommand: --json prints the
// JSON on stdout instead of the human output, --json-out FILE writes the same
// JSON to FILE and leaves the human output. End to end on the bundled model.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string tinymoe() { return (test::data_dir() / "tinymoe").string(); }
std::string corpus(const std::string& name) { return (test::data_dir() / "corpus" / name).string(); }

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `command` with stderr sent to a file: *out gets stdout alone.
int run_stdout(const std::string& command, const fs::path& err, std::string* out) {
  return test::run_command("(" + command + " 2>" + err.string() + ")", out);
}

// A uniform pack of tinymoe, made once for the suite.
const fs::path& packed() {
  static const fs::path out = [] {
    const fs::path p = test::temp_dir("json-cli-pack") / "packed";
    std::string log;
    EXPECT_EQ(test::run_command(test::binary() + " pack --model " + tinymoe() + " --uniform int8_row --threads 1 -o " +
                                    p.string(),
                                &log),
              0)
        << log;
    return p;
  }();
  return out;
}

struct Case {
  std::string name, args;  // args: everything after the binary, without --json / --json-out
};

std::vector<Case> every_command(const fs::path& dir) {
  const std::string p = packed().string();
  const std::string text = corpus("eval_python.txt.zst");
  return {
      {"formats", "formats"},
      {"inspect", "inspect " + tinymoe()},
      {"inspect-packed", "inspect " + p},
      {"verify", "verify " + p + " --samples 1"},
      {"perplexity", "perplexity --model " + tinymoe() + " --text " + text + " --max-tokens 300 --ctx 64 --threads 1"},
      {"generate", "generate --packed " + p + " --prompt 'The ' -n 8 --threads 1"},
      {"eval", "eval --packed " + p + " --text " + text +
                   " --max-tokens 200 --ctx 64 --no-latency --no-collapse --threads 1"},
      {"profile", "profile --model " + tinymoe() + " --calib " + corpus("calib_small.txt.zst") +
                      " --max-tokens 1024 --ctx 128 --no-sensitivity --threads 1 -o " + (dir / "profile.json").string()},
      {"export", "export --model " + tinymoe() + " --profile " + (dir / "profile.json").string() +
                     " --keep-experts 16 -o " + (dir / "exported").string()},
      {"pack", "pack --model " + tinymoe() + " --uniform int8_row --layers 0-1 --threads 1 -o " + (dir / "a").string()},
      {"pack-b", "pack --model " + tinymoe() + " --uniform int8_row --layers 2-3 --threads 1 -o " + (dir / "b").string()},
      {"merge", "merge " + (dir / "a").string() + " " + (dir / "b").string() + " -o " + (dir / "merged").string()},
      {"tune", "tune --packed " + p + " --text " + text +
                   " --max-tokens 300 --sweep 1,2 --reps 1 --warmup 0 --threads 1 -o " + (dir / "runtime.json").string()},
  };
}

TEST(JsonOutputCli, EveryCommandPrintsJsonOnStdoutAndWritesTheSameToJsonOut) {
  const fs::path dir = test::temp_dir("json-cli-all");
  for (const Case& c : every_command(dir)) {
    SCOPED_TRACE(c.name);
    const fs::path file = dir / ("json-out-" + c.name);
    std::string out;
    ASSERT_EQ(run_stdout(test::binary() + " " + c.args + " --json --json-out " + file.string(), dir / "err", &out), 0)
        << out << read_text(dir / "err");
    // stdout is the JSON alone: no table line before or after it.
    json j;
    ASSERT_NO_THROW(j = json::parse(out)) << out;
    EXPECT_TRUE(j.is_object() || j.is_array());
    ASSERT_TRUE(fs::exists(file));
    EXPECT_EQ(read_text(file), out);
  }
}

TEST(JsonOutputCli, JsonOutKeepsTheHumanOutput) {
  const fs::path dir = test::temp_dir("json-cli-human");
  const std::string p = packed().string();
  struct Human {
    std::string args, line;  // a line of the human output
  };
  for (const Human& h : {Human{"verify " + p + " --samples 1", ": OK"}, Human{"inspect " + tinymoe(), "model_type  qwen3_moe"},
                         Human{"inspect " + p, "int8_row"}, Human{"formats", "bits/w"}}) {
    SCOPED_TRACE(h.args);
    const fs::path file = dir / "out.json";
    fs::remove(file);
    std::string out;
    ASSERT_EQ(run_stdout(test::binary() + " " + h.args + " --json-out " + file.string(), dir / "err", &out), 0) << out;
    EXPECT_NE(out.find(h.line), std::string::npos) << out;
    EXPECT_FALSE(json::accept(out)) << out;
    std::string alone;
    ASSERT_EQ(run_stdout(test::binary() + " " + h.args + " --json", dir / "err", &alone), 0) << alone;
    // The same JSON as --json prints (verify's and inspect's hold no timings).
    EXPECT_EQ(json::parse(read_text(file)), json::parse(alone));
  }
}

TEST(JsonOutputCli, JsonWithAValueIsRefusedNamingJsonOut) {
  const fs::path dir = test::temp_dir("json-cli-value");
  const std::string eval = test::binary() + " eval --packed " + packed().string() + " --text " +
                           corpus("eval_python.txt.zst") + " --max-tokens 100 --ctx 64 --no-latency --no-collapse";
  const fs::path report = dir / "report.json";
  for (const std::string& arg : {" --json " + report.string(), " --json=" + report.string()}) {
    std::string out;
    EXPECT_EQ(test::run_command(eval + arg, &out), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find("--json takes no value"), std::string::npos) << out;
    EXPECT_NE(out.find("use --json-out " + report.string()), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(report));
  }
  std::string out;
  EXPECT_EQ(test::run_command(eval + " --json -", &out), 2) << out;
  EXPECT_NE(out.find("--json takes no value: it prints the JSON on stdout"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(eval + " --json-out -", &out), 2) << out;
  EXPECT_NE(out.find("--json-out"), std::string::npos) << out;
  EXPECT_NE(out.find("use --json"), std::string::npos) << out;
  // --json-out is an output like any other: never over an input.
  const std::string text = corpus("eval_python.txt.zst");
  const auto before = test::snapshot(text);
  EXPECT_EQ(test::run_command(test::binary() + " perplexity --model " + tinymoe() + " --text " + text +
                                  " --max-tokens 100 --json-out " + text,
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("output --json-out " + text + " is the same file as input --text"), std::string::npos) << out;
  EXPECT_TRUE(test::snapshot(text) == before);
}

}  // namespace
}  // namespace eq

// Outputs never destroy inputs (io::check_outputs_apart, run by every command
// that writes): an output that is, contains or lies inside an input is
// refused with exit 2 naming both, before any work, and the input stays
// byte-identical; `profile -o` replaces an existing file only with --force.
// Every case writes its own copies of the bundled model and texts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

std::string model() { return (test::data_dir() / "tinymoe").string(); }

// A command refused because `out` overlaps `in`: exit 2, one line naming both
// options and paths and `how` they relate.
void expect_refused(const std::string& command, const std::string& out_option, const fs::path& out,
                    const std::string& in_option, const fs::path& in, const std::string& how) {
  std::string output;
  const int rc = test::run_command(command, &output);
  EXPECT_EQ(rc, static_cast<int>(ErrorKind::kInvalidInput)) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  const std::string line = out_option + " " + out.string() + " " + how + " input " + in_option + " " + in.string();
  EXPECT_NE(output.find(line), std::string::npos) << "expected '" << line << "' in: " << output;
}

struct Inputs {
  fs::path dir, model, calib;
};

Inputs copy_inputs(const std::string& tag) {
  Inputs in;
  in.dir = test::temp_dir(tag);
  in.model = in.dir / "model";
  in.calib = in.dir / "calib.txt.zst";
  fs::copy(model(), in.model, fs::copy_options::recursive);
  fs::copy_file(test::data_dir() / "corpus" / "calib_small.txt.zst", in.calib);
  return in;
}

std::string profile_command(const Inputs& in, const fs::path& out, const std::string& extra = "") {
  return test::binary() + " profile --model " + in.model.string() + " --calib " + in.calib.string() +
         " --max-tokens 64 --ctx 32 --no-sensitivity --threads 1 -o " + out.string() + " " + extra;
}

TEST(InputsKept, ProfileNeverOverwritesItsInputs) {
  const Inputs in = copy_inputs("kept-profile");
  const auto model_before = test::snapshot(in.model), calib_before = test::snapshot(in.calib);
  for (const std::string force : {"", "--force"}) {
    SCOPED_TRACE(force);
    expect_refused(profile_command(in, in.calib, force), "-o", in.calib, "--calib", in.calib, "is the same file as");
    expect_refused(profile_command(in, in.model / "config.json", force), "-o", in.model / "config.json", "--model",
                   in.model, "lies inside");
    // The same file under another name: a hard link, a path through a symlink.
    const fs::path link = in.dir / "hardlink.json";
    fs::remove(link);
    fs::create_hard_link(in.calib, link);
    expect_refused(profile_command(in, link, force), "-o", link, "--calib", in.calib, "is the same file as");
    const fs::path alias = in.dir / "alias";
    fs::remove(alias);
    fs::create_directory_symlink(in.model, alias);
    expect_refused(profile_command(in, alias / "config.json", force), "-o", alias / "config.json", "--model",
                   in.model, "lies inside");
    expect_refused(profile_command(in, in.dir / "p.json", force + " --heatmap " + in.calib.string()), "--heatmap",
                   in.calib, "--calib", in.calib, "is the same file as");
  }
  EXPECT_TRUE(test::snapshot(in.model) == model_before) << "the model changed";
  EXPECT_TRUE(test::snapshot(in.calib) == calib_before) << "the calibration text changed";
}

TEST(InputsKept, ProfileReplacesAnExistingFileOnlyWithForce) {
  const Inputs in = copy_inputs("kept-profile-force");
  const fs::path out = in.dir / "notes.json";
  { std::ofstream(out) << "my notes\n"; }
  std::string output;
  EXPECT_EQ(test::run_command(profile_command(in, out), &output), static_cast<int>(ErrorKind::kInvalidInput)) << output;
  EXPECT_NE(output.find("-o " + out.string() + " already exists (use --force to replace it)"), std::string::npos)
      << output;
  EXPECT_EQ(test::snapshot(out).begin()->second, "my notes\n");
  EXPECT_EQ(test::run_command(profile_command(in, out, "--force"), &output), 0) << output;
  EXPECT_NE(test::snapshot(out).begin()->second, "my notes\n");
}

TEST(InputsKept, PackAndMergeNeverReplaceTheirInputs) {
  const Inputs in = copy_inputs("kept-pack");
  const auto model_before = test::snapshot(in.model);
  const std::string pack = test::binary() + " pack --model " + in.model.string() + " --uniform int8_row --threads 1";
  expect_refused(pack + " -o " + in.model.string() + " --force", "-o", in.model, "--model", in.model,
                 "is the same file as");
  expect_refused(pack + " -o " + (in.model / "packed").string(), "-o", in.model / "packed", "--model", in.model,
                 "lies inside");
  expect_refused(pack + " -o " + in.dir.string() + " --force", "-o", in.dir, "--model", in.model, "contains");
  EXPECT_TRUE(test::snapshot(in.model) == model_before) << "the source checkpoint changed";

  std::string output;
  const fs::path a = in.dir / "a", b = in.dir / "b";
  ASSERT_EQ(test::run_command(pack + " --layers 0-1 -o " + a.string(), &output), 0) << output;
  ASSERT_EQ(test::run_command(pack + " --layers 2-3 -o " + b.string(), &output), 0) << output;
  const auto a_before = test::snapshot(a);
  expect_refused(test::binary() + " merge " + a.string() + " " + b.string() + " -o " + a.string() + " --force", "-o", a,
                 "part", a, "is the same file as");
  EXPECT_TRUE(test::snapshot(a) == a_before) << "a merge input changed";
  EXPECT_TRUE(test::output_leftovers(a).empty());
}

TEST(InputsKept, EvalAndTuneNeverOverwriteTheirInputs) {
  const Inputs in = copy_inputs("kept-eval");
  const fs::path packed = in.dir / "packed", text = in.dir / "text.txt.zst";
  fs::copy_file(test::data_dir() / "corpus" / "eval_python.txt.zst", text);
  std::string output;
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + in.model.string() +
                                  " --uniform int8_row --threads 1 -o " + packed.string(),
                              &output),
            0)
      << output;
  const auto packed_before = test::snapshot(packed), text_before = test::snapshot(text);
  const std::string eval = test::binary() + " eval --packed " + packed.string() + " --text " + text.string() +
                           " --max-tokens 100 --ctx 32 --no-latency --no-collapse --threads 1";
  expect_refused(eval + " --json-out " + text.string(), "--json-out", text, "--text", text, "is the same file as");
  expect_refused(eval + " --html " + (packed / "config.json").string(), "--html", packed / "config.json", "--packed",
                 packed, "lies inside");
  // Two outputs on one file would overwrite each other.
  const fs::path report = in.dir / "report";
  EXPECT_EQ(test::run_command(eval + " --json-out " + report.string() + " --html " + report.string(), &output),
            static_cast<int>(ErrorKind::kInvalidInput))
      << output;
  EXPECT_NE(output.find("give each output its own path"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(report));
  const std::string tune = test::binary() + " tune --packed " + packed.string() + " --text " + text.string() +
                           " --sweep 1,2 --reps 1 --warmup 0 --threads 1";
  expect_refused(tune + " -o " + (packed / "manifest.json").string(), "-o", packed / "manifest.json", "--packed",
                 packed, "lies inside");
  EXPECT_TRUE(test::snapshot(packed) == packed_before) << "the packed folder changed";
  EXPECT_TRUE(test::snapshot(text) == text_before) << "the text changed";
}

}  // namespace
}  // namespace eq

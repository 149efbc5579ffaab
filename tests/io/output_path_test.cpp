// io::check_outputs_apart / check_replace_allowed on files this test creates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/output_path.h"
#include "test_support.h"

namespace eq::io {
namespace {

namespace fs = std::filesystem;

// The message of the eq::Error (exit 2) `f` throws; "" when it does not throw.
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    return e.what();
  }
  return "";
}

std::string apart(const std::string& out, const std::string& in) {
  return refusal([&] { check_outputs_apart({{"-o", out}}, {{"--in", in}}); });
}

TEST(OutputPath, OverlapsAreRefusedNamingBoth) {
  const fs::path dir = test::temp_dir("output-path");
  fs::create_directories(dir / "model" / "sub");
  std::ofstream(dir / "model" / "config.json") << "{}";
  std::ofstream(dir / "text") << "x";
  const std::string m = (dir / "model").string(), t = (dir / "text").string();
  EXPECT_EQ(apart(t, t), "output -o " + t + " is the same file as input --in " + t +
                             ": an output never replaces or writes into an input");
  EXPECT_NE(apart(m + "/config.json", m).find("lies inside input --in " + m), std::string::npos);
  EXPECT_NE(apart(m + "/new/deeper.json", m).find("lies inside"), std::string::npos);  // not existing yet
  EXPECT_NE(apart(dir.string(), m).find("contains input --in " + m), std::string::npos);
  EXPECT_NE(apart(m + "/sub/../config.json", m + "/config.json").find("is the same file"), std::string::npos);
  EXPECT_NE(apart(m + "/", m).find("is the same file"), std::string::npos);
  // Hard link and symlinked folder: other names, the same file.
  fs::create_hard_link(dir / "text", dir / "link");
  EXPECT_NE(apart((dir / "link").string(), t).find("is the same file"), std::string::npos);
  fs::create_directory_symlink(dir / "model", dir / "alias");
  EXPECT_NE(apart((dir / "alias" / "config.json").string(), m).find("lies inside"), std::string::npos);
  EXPECT_NE(apart((dir / "alias" / "later.json").string(), m).find("lies inside"), std::string::npos);
  // Apart: siblings, a common prefix that is not a folder boundary, stdout, empty.
  EXPECT_EQ(apart((dir / "other.json").string(), m), "");
  EXPECT_EQ(apart(m + "2", m), "");
  EXPECT_EQ(apart("-", m), "");
  EXPECT_EQ(apart(t, ""), "");
  // Two outputs on one file.
  EXPECT_NE(refusal([&] { check_outputs_apart({{"--json", t + ".r"}, {"--html", t + ".r"}}, {}); })
                .find("give each output its own path"),
            std::string::npos);
}

TEST(OutputPath, ReplacingNeedsForce) {
  const fs::path dir = test::temp_dir("output-path-force");
  std::ofstream(dir / "p.json") << "{}";
  const std::string p = (dir / "p.json").string();
  EXPECT_EQ(refusal([&] { check_replace_allowed({"-o", p}, false); }),
            "-o " + p + " already exists (use --force to replace it)");
  EXPECT_EQ(refusal([&] { check_replace_allowed({"-o", p}, true); }), "");
  EXPECT_EQ(refusal([&] { check_replace_allowed({"-o", (dir / "new.json").string()}, false); }), "");
}

}  // namespace
}  // namespace eq::io

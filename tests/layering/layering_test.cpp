// The modules of lib/ form layers with no cycle: every #include "module/..."
// in lib/ names the file's own module or one on a lower line of lib/layers.txt.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

// Module name -> its line in lib/layers.txt (0 = the bottom layer).
std::map<std::string, int> read_layers(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << "cannot open " << file;
  std::map<std::string, int> level;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string module;
    while (words >> module) {
      EXPECT_FALSE(level.count(module)) << file << ": module " << module << " listed twice";
      level[module] = n;
    }
    ++n;
  }
  return level;
}

std::map<std::string, int> layers() { return read_layers(test::source_dir() / "lib/layers.txt"); }

bool is_source(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh";
}

TEST(Layering, EveryModuleOfLibIsListedOnce) {
  const auto level = layers();
  std::set<std::string> folders;
  for (const auto& e : fs::directory_iterator(test::source_dir() / "lib"))
    if (e.is_directory()) folders.insert(e.path().filename().string());
  for (const auto& f : folders) EXPECT_TRUE(level.count(f)) << "lib/" << f << " is missing from lib/layers.txt";
  for (const auto& [module, n] : level) EXPECT_TRUE(folders.count(module)) << "lib/layers.txt lists " << module
                                                                           << ", which is no folder of lib/";
  // profile and pack meet only through plan, below both: neither includes the other.
  EXPECT_LT(level.at("io"), level.at("plan"));
  EXPECT_LT(level.at("plan"), level.at("profile"));
  EXPECT_LT(level.at("plan"), level.at("pack"));
  EXPECT_EQ(level.at("profile"), level.at("pack"));
}

// The module of `#include "module/..."` on this line; nothing for any other line.
// (A hand scan: std::regex trips GCC 12's -Wmaybe-uninitialized under ASan.)
std::optional<std::string> included_module(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return std::nullopt;
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos || line.compare(i, 7, "include") != 0) return std::nullopt;
  i = line.find_first_not_of(" \t", i + 7);
  if (i == std::string::npos || line[i] != '"') return std::nullopt;
  const size_t start = i + 1;
  size_t end = start;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
  if (end == start || end >= line.size() || line[end] != '/') return std::nullopt;
  if (line.find('"', end) == std::string::npos) return std::nullopt;
  return line.substr(start, end - start);
}

TEST(Layering, IncludedModuleReadsOnlyModuleIncludes) {
  EXPECT_EQ(included_module("#include \"plan/allocation.h\""), "plan");
  EXPECT_EQ(included_module("  #  include \"io/json_node.h\"  // why"), "io");
  EXPECT_EQ(included_module("#include <vector>"), std::nullopt);
  EXPECT_EQ(included_module("#include \"local.h\""), std::nullopt);
  EXPECT_EQ(included_module("// #include \"pack/pack.h\""), std::nullopt);
  EXPECT_EQ(included_module("#define include \"pack/x.h\""), std::nullopt);
}

TEST(Layering, EveryIncludeOfLibPointsDown) {
  const fs::path lib = test::source_dir() / "lib";
  const auto level = layers();
  std::string violations;
  size_t checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(lib)) {
    if (!e.is_regular_file() || !is_source(e.path())) continue;
    const fs::path rel = fs::relative(e.path(), lib);
    const std::string owner = rel.begin()->string();
    if (!level.count(owner)) continue;  // reported by EveryModuleOfLibIsListedOnce
    std::ifstream in(e.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::optional<std::string> target_module = included_module(line);
      if (!target_module) continue;
      ++checked;
      const std::string& target = *target_module;
      const std::string where = "lib/" + rel.string() + ":" + std::to_string(number) + " includes " +
                                line.substr(line.find('"')) + ": ";
      if (target == owner) continue;
      if (!level.count(target))
        violations += where + target + " is no module of lib/layers.txt\n";
      else if (level.at(target) == level.at(owner))
        violations += where + target + " and " + owner + " are peers in lib/layers.txt\n";
      else if (level.at(target) > level.at(owner))
        violations += where + target + " is above " + owner + " in lib/layers.txt\n";
    }
  }
  EXPECT_GT(checked, 500u);  // the scan found the sources (over 900 includes)
  EXPECT_EQ(violations, "") << "includes against the layer order:\n" << violations;
}

}  // namespace
}  // namespace eq

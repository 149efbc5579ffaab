#include "test_support.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

#include "core/build_info.h"

namespace eq::test {

std::filesystem::path source_dir() { return EQ_SOURCE_DIR; }

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("EQ_SHARED_DIR"); env && *env) {
    std::filesystem::path p(env);
    return std::filesystem::exists(p / "models") ? p : std::filesystem::path();
  }
  auto p = source_dir().parent_path() / "shared";
  return std::filesystem::exists(p / "models") ? p : std::filesystem::path();
}

std::filesystem::path data_dir() { return source_dir() / "data"; }

namespace {
struct TempRoot {
  std::filesystem::path root;
  TempRoot() {
    std::random_device rd;
    root = std::filesystem::temp_directory_path() /
           ("eq-test-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 1000000));
    std::filesystem::create_directories(root);
  }
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};
TempRoot& temp_root() {
  static TempRoot r;
  return r;
}
}  // namespace

std::filesystem::path temp_dir(const std::string& tag) {
  static int counter = 0;
  auto p = temp_root().root / (tag + "-" + std::to_string(counter++));
  std::filesystem::create_directories(p);
  return p;
}

int run_command(const std::string& command, std::string* output) {
  std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf;
  std::string out;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The test objects are linked against the plain and, with EQ_SANITIZER_TESTS,
// the sanitized library: each runs the binary built like its library.
std::string binary() {
#ifdef EQ_SANITIZED_BINARY
  if (built_with_sanitizers()) return EQ_SANITIZED_BINARY;
#endif
  return EQ_BINARY;
}

std::map<std::string, std::string> snapshot(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  auto read = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  if (fs::is_regular_file(path)) return {{path.filename().string(), read(path)}};
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(path))
    if (e.is_regular_file()) files[fs::relative(e.path(), path).string()] = read(e.path());
  return files;
}

void flip_byte(const std::filesystem::path& file, uint64_t offset, unsigned char mask) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ static_cast<char>(mask));
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

std::vector<std::filesystem::path> output_leftovers(const std::filesystem::path& out) {
  std::vector<std::filesystem::path> found;
  const std::string name = out.filename().string();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(out.parent_path(), ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with(name + ".partial") || n.starts_with(name + ".old-")) found.push_back(e.path());
  }
  return found;
}

}  // namespace eq::test

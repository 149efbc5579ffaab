// Shared helpers for the GoogleTest suites.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace eq::test {

// Absolute path of the repository (set by CMake).
std::filesystem::path source_dir();
// ../shared beside the repository (or $EQ_SHARED_DIR); empty when absent.
std::filesystem::path shared_dir();
// The bundled model and texts in data/.
std::filesystem::path data_dir();
// A fresh temporary directory, removed when the test binary exits.
std::filesystem::path temp_dir(const std::string& tag);
// Runs a shell command, returns its exit status; stdout+stderr captured into *output.
int run_command(const std::string& command, std::string* output = nullptr);
// Path of the expertquant binary.
std::string binary();
// The staging ("OUT.partial-…") and moved-aside ("OUT.old-…") folders beside
// a pack/merge output OUT (lib/pack/output.h); empty after a clean run.
std::vector<std::filesystem::path> output_leftovers(const std::filesystem::path& out);
// Relative path -> contents of every regular file under `path` (or of the file
// itself, keyed by its name): to assert that a folder or file did not change.
std::map<std::string, std::string> snapshot(const std::filesystem::path& path);
// XORs the byte at `offset` of `file` with `mask` in place (damaged inputs).
void flip_byte(const std::filesystem::path& file, uint64_t offset, unsigned char mask);

}  // namespace eq::test

// Skips the current test with a message when ../shared is absent.
#define EQ_REQUIRE_SHARED()                                                        \
  do {                                                                             \
    if (::eq::test::shared_dir().empty())                                          \
      GTEST_SKIP() << "../shared not found (set EQ_SHARED_DIR): reference test skipped"; \
  } while (0)

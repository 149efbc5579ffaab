#include "pack/folder_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "pack/manifest.h"

namespace eq::pack {

void check_packed_side_files(const std::string& folder) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(folder) / kManifestFile, ec)) return;
  if (const auto problems = check_files(load_manifest(folder), folder); !problems.empty()) invalid(problems.front());
}

bool folder_has_tokenizer(const std::string& folder, int64_t model_vocab_size) {
  check_packed_side_files(folder);
  return tokenizer::has_tokenizer(folder, model_vocab_size);
}

std::unique_ptr<tokenizer::Tokenizer> load_folder_tokenizer(const std::string& folder, int64_t model_vocab_size) {
  check_packed_side_files(folder);
  return tokenizer::load_tokenizer(folder, model_vocab_size);
}

}  // namespace eq::pack

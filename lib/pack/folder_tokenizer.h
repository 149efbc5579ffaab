// The tokenizer of a model folder as the commands that encode or decode text
// open it. A packed folder (one holding manifest.json) uses only the side
// files its manifest lists, each with its recorded size and checksum: a
// tokenizer file edited or added after packing is refused, naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace eq::pack {

// Throws eq::Error (exit 2) naming the first side file of a packed `folder`
// that differs from its manifest; does nothing for a folder without one.
void check_packed_side_files(const std::string& folder);

// tokenizer::has_tokenizer / load_tokenizer after check_packed_side_files.
bool folder_has_tokenizer(const std::string& folder, int64_t model_vocab_size);
std::unique_ptr<tokenizer::Tokenizer> load_folder_tokenizer(const std::string& folder, int64_t model_vocab_size);

}  // namespace eq::pack

// Whole-file reads for profile inputs, decompressing zstd (calibration text in
// data/corpus/*.zst, routing traces). Local to profile because
// io::read_file_bytes currently rejects complete single-frame files as
// "truncated" (its flush loop asks the finished stream for a next frame);
// switch back once lib/io is fixed.
#pragma once

#include <string>

namespace eq::profile {

std::string read_input_file(const std::string& path);

}  // namespace eq::profile

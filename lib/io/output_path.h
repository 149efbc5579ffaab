// Outputs never destroy inputs: every command that writes names its outputs
// and inputs (with the option that gave each) and calls check_outputs_apart
// before any work. One place decides what "the same file" means.
#pragma once

#include <string>
#include <vector>

namespace eq::io {

struct NamedPath {
  std::string option;  // "-o", "--model", "--heatmap", ... (named in errors)
  std::string path;    // "" or "-" (stdout): not a file, skipped
};

// Refuses (invalid, exit 2, naming both) an output that is, contains or lies
// inside one of the inputs, or that is, contains or lies inside another
// output. Paths are compared canonically (weakly_canonical for paths that do
// not exist yet, so symlinks and "a/../b" do not hide an overlap) and by
// device and inode (hard links, bind mounts).
void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// Refuses (invalid, exit 2) an existing `output` unless `force`:
// "OPTION PATH already exists (use --force to replace it)".
void check_replace_allowed(const NamedPath& output, bool force);

}  // namespace eq::io

#include "io/output_path.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include "core/error.h"

namespace eq::io {

namespace fs = std::filesystem;

namespace {

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<FileId> file_id(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// The path as the filesystem resolves it: symlinks followed for the part that
// exists, the rest normalized lexically.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();  // "dir/" -> "dir"
  return p;
}

// `inner` is `outer` or lies below it, lexically on resolved paths.
bool lexically_within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return true;
}

// `inner` is `outer` or lies below it: by path, or by identity of `outer` with
// `inner` or one of its existing ancestors (a hard link, a bind mount).
bool within(const fs::path& inner, const fs::path& outer) {
  if (lexically_within(inner, outer)) return true;
  const auto outer_id = file_id(outer);
  if (!outer_id) return false;
  for (fs::path p = inner;; p = p.parent_path()) {
    if (const auto id = file_id(p); id && *id == *outer_id) return true;
    if (!p.has_relative_path()) return false;  // the root
  }
}

// "" when `a` and `b` are apart; otherwise how `a` relates to `b`.
std::string relation(const fs::path& a, const fs::path& b) {
  const bool a_in_b = within(a, b), b_in_a = within(b, a);
  if (a_in_b && b_in_a) return "is the same file as";
  if (a_in_b) return "lies inside";
  if (b_in_a) return "contains";
  return "";
}

bool is_file_path(const NamedPath& p) { return !p.path.empty() && p.path != "-"; }

}  // namespace

void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (!is_file_path(out)) continue;
    const fs::path o = resolved(out.path);
    for (const NamedPath& in : inputs) {
      if (!is_file_path(in)) continue;
      const std::string how = relation(o, resolved(in.path));
      if (!how.empty())
        invalid("output " + out.option + " " + out.path + " " + how + " input " + in.option + " " + in.path +
                ": an output never replaces or writes into an input");
    }
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (!is_file_path(outputs[j])) continue;
      const std::string how = relation(o, resolved(outputs[j].path));
      if (!how.empty())
        invalid("output " + out.option + " " + out.path + " " + how + " output " + outputs[j].option + " " +
                outputs[j].path + ": give each output its own path");
    }
  }
}

void check_replace_allowed(const NamedPath& output, bool force) {
  std::error_code ec;
  if (!force && is_file_path(output) && fs::exists(fs::symlink_status(output.path, ec)))
    invalid(output.option + " " + output.path + " already exists (use --force to replace it)");
}

}  // namespace eq::io

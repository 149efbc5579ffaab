#include "core/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace eq {

void return_free_memory_to_os() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

uint64_t proc_status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t key_len = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, key_len, key) == 0 && line.size() > key_len && line[key_len] == ':') {
      unsigned long long kb = 0;
      if (std::sscanf(line.c_str() + key_len + 1, "%llu", &kb) == 1) return kb * 1024ULL;
    }
  }
  return 0;
}

uint64_t peak_rss_bytes() { return proc_status_bytes("VmHWM"); }
uint64_t current_rss_bytes() { return proc_status_bytes("VmRSS"); }

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    invalid(what + ": '" + text + "' is not a byte count (examples: 1073741824, 512M, 1.5G)");
  }
  std::string unit = text.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else invalid(what + ": unknown unit '" + text.substr(pos) + "' in '" + text + "' (use B, K, M, G, T)");
  const double bytes = value * mult;
  if (!(bytes >= 0) || !std::isfinite(bytes) || bytes > 1.8e19)
    invalid(what + ": '" + text + "' is out of range");
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (b < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace eq

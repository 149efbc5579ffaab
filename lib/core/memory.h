// Process memory figures from the OS (Linux /proc), so pack can report and
// bound its real peak resident set instead of an estimate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace eq {

// Returns the free memory of the heap arenas to the OS (glibc malloc_trim).
// Freed blocks of a few MB (a layer's expert matrices) stay in arenas that
// fragment and never shrink by themselves: a layer-major pass calls this as
// it releases each layer, or its RSS grows by most of a layer's float32
// weights every few layers (docs/design.md, "Layer-major passes").
void return_free_memory_to_os();

// A "Key:   N kB" field of /proc/self/status (VmHWM, VmRSS, RssAnon, ...)
// in bytes; 0 when unavailable.
uint64_t proc_status_bytes(const char* key);
// Peak resident set size (VmHWM) in bytes; 0 when unavailable.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS) in bytes; 0 when unavailable.
uint64_t current_rss_bytes();
// Resets the kernel's peak-RSS mark to the current RSS (writes "5" to
// /proc/self/clear_refs). Returns false when the kernel does not allow it, in
// which case VmHWM keeps counting from process start (a conservative figure).
bool reset_peak_rss();
// Total physical memory in bytes (sysconf); 0 when unavailable.
uint64_t physical_memory_bytes();

// Parses a byte count: "123", "64K", "1.5G", "512MiB", "2GB" (binary units:
// K = 1024). Throws eq::Error naming `what` when malformed.
uint64_t parse_byte_size(const std::string& text, const std::string& what);
// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace eq

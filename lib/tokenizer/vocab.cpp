#include "tokenizer/vocab.h"

#include <xxhash.h>

namespace eq::tokenizer {

uint64_t Vocab::hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

size_t Vocab::find_slot(std::string_view token, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const uint32_t high = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0 || (s.hash_high == high && tokens_[static_cast<size_t>(s.id)] == token)) return i;
  }
}

std::optional<int32_t> Vocab::id(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const int32_t id = slots_[find_slot(token, hash(token))].id;
  if (id < 0) return std::nullopt;
  return id;
}

void Vocab::rehash(size_t slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{});
  const size_t mask = slots - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    const uint64_t h = hash(tokens_[static_cast<size_t>(s.id)]);
    size_t i = h & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void Vocab::reserve(size_t n) {
  tokens_.reserve(n);
  present_.reserve(n);
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  if (slots > slots_.size()) rehash(slots);
}

bool Vocab::add(std::string_view token, int32_t id) {
  if (static_cast<size_t>(id) < tokens_.size() && present_[id]) return false;
  if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
  const uint64_t h = hash(token);
  const size_t at = find_slot(token, h);
  if (slots_[at].id >= 0) return false;
  if (static_cast<size_t>(id) >= tokens_.size()) {
    tokens_.resize(static_cast<size_t>(id) + 1);
    present_.resize(static_cast<size_t>(id) + 1, false);
  }
  tokens_[static_cast<size_t>(id)] = token;
  present_[static_cast<size_t>(id)] = true;
  slots_[at] = {static_cast<uint32_t>(h >> 32), id};
  ++count_;
  return true;
}

}  // namespace eq::tokenizer

#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <functional>
#include <queue>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"

namespace eq::tokenizer {

BpeModel::BpeModel(const JsonNode& model) {
  model.require_object();
  const std::string type = model.str_or("type", "BPE");
  if (type != "BPE") refuse_component(model, "model", type);
  if (auto d = model.find("dropout"))
    if (d->value().is_number() && d->value().get<double>() != 0.0)
      refuse_component(*d, "option", "dropout");  // random merges: never what a forward pass wants
  if (auto p = model.find("continuing_subword_prefix")) prefix_ = p->str();
  if (auto s = model.find("end_of_word_suffix")) suffix_ = s->str();
  byte_fallback_ = model.bool_or("byte_fallback", false);
  fuse_unk_ = model.bool_or("fuse_unk", false);
  ignore_merges_ = model.bool_or("ignore_merges", false);
  load_vocab(model.at("vocab"));
  if (auto u = model.find("unk_token")) {
    unk_id_ = vocab_.id(u->str());
    if (!unk_id_) u->invalid("\"" + u->str() + "\" is not in model.vocab");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = vocab_.id(name).value_or(-1);
  }
  if (auto m = model.find("merges")) load_merges(*m);
}

void BpeModel::load_vocab(const JsonNode& vocab) {
  vocab.require_object();
  vocab_.reserve(vocab.value().size());
  for (const auto& item : vocab.value().items()) {
    // Named, not structured bindings: clang before 16 cannot capture those in the lambda below.
    const std::string& token = item.key();
    const nlohmann::json& id = item.value();
    const auto field = [&] { return vocab.path() + "[\"" + token + "\"]"; };
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
      eq::invalid(vocab.file() + ": " + field() + ": expected an id in [0, " + std::to_string(kMaxTokenId) +
                  "], found " + id.dump());
    const int32_t v = static_cast<int32_t>(id.get<int64_t>());
    if (!vocab_.add(token, v))
      eq::invalid(vocab.file() + ": " + field() + ": id " + std::to_string(v) + " is already \"" +
                  (vocab_.token(v) ? *vocab_.token(v) : token) + "\" (each id names one token)");
  }
}

void BpeModel::load_merges(const JsonNode& merges) {
  merges.require_array();
  const auto& list = merges.value();
  merges_.reserve(list.size());
  std::string joined;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string_view a, b;
    const auto& m = list[i];
    if (m.is_string()) {
      const std::string_view s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
        merges.index(i).invalid("expected \"left right\" (two tokens, one space), found \"" + std::string(s) + "\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    } else {
      merges.index(i).invalid("expected \"left right\" or [left, right], found " + m.dump());
    }
    const auto ia = vocab_.id(a), ib = vocab_.id(b);
    if (!ia || !ib) merges.index(i).invalid("token \"" + std::string(ia ? b : a) + "\" is not in model.vocab");
    joined.assign(a);
    if (b.size() >= prefix_.size()) joined.append(b.substr(prefix_.size()));
    const auto merged = vocab_.id(joined);
    if (!merged) merges.index(i).invalid("merged token \"" + joined + "\" is not in model.vocab");
    // A pair listed twice keeps its last rank, as the reference's map does.
    merges_.insert_or_assign(pair_key(*ia, *ib), Merge{static_cast<uint32_t>(i), *merged});
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  symbols.clear();
  uint32_t unk_len = 0;  // bytes of a pending run of unknown characters (0: none)
  const auto push = [&](int32_t id, uint32_t len) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, len});
  };
  std::string scratch;
  for (size_t i = 0; i < word.size();) {
    size_t n = utf8_sequence_length(word, i);
    if (n == 0) n = 1;
    std::string_view ch = word.substr(i, n);
    const bool first = i == 0, last = i + n == word.size();
    std::string_view key = ch;
    if ((!prefix_.empty() && !first) || (!suffix_.empty() && last)) {
      scratch.assign(!first ? prefix_ : std::string());
      scratch.append(ch);
      if (last) scratch.append(suffix_);
      key = scratch;
    }
    i += n;
    if (auto id = vocab_.id(key)) {
      if (unk_len) push(*unk_id_, unk_len), unk_len = 0;
      push(*id, static_cast<uint32_t>(n));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : key) all &= byte_ids_[c] >= 0;
      if (all) {
        if (unk_len) push(*unk_id_, unk_len), unk_len = 0;
        for (unsigned char c : key) push(byte_ids_[c], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (unk_len && !fuse_unk_) push(*unk_id_, unk_len), unk_len = 0;
      unk_len += static_cast<uint32_t>(n);
    }
    // Without an unknown token the character is dropped, as the reference does.
  }
  if (unk_len) push(*unk_id_, unk_len);
  if (!symbols.empty()) symbols.back().next = -1;
}

void BpeModel::merge_all(std::vector<Symbol>& symbols) const {
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator<(const Candidate& o) const {  // max-heap: lowest rank, then leftmost, on top
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  // At most one candidate per pair at first; sized once, so a long word
  // costs its candidates and no doubling slack.
  std::vector<Candidate> storage;
  storage.reserve(symbols.size());
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    auto it = merges_.find(pair_key(symbols[i].id, symbols[i + 1].id));
    if (it != merges_.end()) queue.push({it->second.rank, static_cast<int32_t>(i), it->second.new_id});
  }
  const int32_t count = static_cast<int32_t>(symbols.size());
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols[next_pos];
    auto it = merges_.find(pair_key(cur.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale: a neighbour merged first
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && right.next < count) symbols[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      auto p = merges_.find(pair_key(symbols[cur.prev].id, cur.id));
      if (p != merges_.end()) queue.push({p->second.rank, cur.prev, p->second.new_id});
    }
    if (cur.next > -1 && cur.next < count) {
      auto q = merges_.find(pair_key(cur.id, symbols[cur.next].id));
      if (q != merges_.end()) queue.push({q->second.rank, top.pos, q->second.new_id});
    }
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_)
    if (auto id = vocab_.id(word)) {
      out.push_back(*id);
      return;
    }
  // Reused across words; a long word's storage is given back after it, so a
  // thread holds at most kKeptSymbols between words.
  constexpr size_t kKeptSymbols = size_t{1} << 16;
  thread_local std::vector<Symbol> symbols;
  if (symbols.capacity() < word.size()) {
    symbols.clear();
    symbols.reserve(word.size());  // at most one symbol per byte: no doubling slack
  }
  initial_symbols(word, symbols);
  merge_all(symbols);
  for (const Symbol& s : symbols)
    if (s.len != 0) out.push_back(s.id);
  if (symbols.capacity() > kKeptSymbols) std::vector<Symbol>().swap(symbols);
}

}  // namespace eq::tokenizer

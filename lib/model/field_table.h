// A struct's members as data: one row per member (a pointer to it and the
// name it is printed under), from which the struct's printed, compared and
// summarized forms are generated instead of being listed by hand in each.
//
// covers_every_member() is what makes a forgotten row a compile error: the
// rows must name distinct members, and as many as the struct has (counted by
// aggregate initialization, member_count()). The struct must therefore be an
// aggregate: public members, no constructors, no base classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace eq::model {

// A member listed under `name`; `shown_as`: its key in a summary (empty: not shown).
template <class S, class M>
struct FieldRow {
  std::string_view name;
  M S::*member;
  std::string_view shown_as;
};
// A member that is a struct with rows of its own, listed in its place under
// "<prefix>_<row name>" (the prefix alone for a row named "").
template <class S, class M>
struct NestedRows {
  std::string_view prefix;
  M S::*member;
};
// A member deliberately left out of what the rows generate (the table says why).
template <class S, class M>
struct UnlistedRow {
  M S::*member;
};

template <class S, class M>
constexpr FieldRow<S, M> field(std::string_view name, M S::*member, std::string_view shown_as = {}) {
  return {name, member, shown_as};
}
template <class S, class M>
constexpr NestedRows<S, M> nested(std::string_view prefix, M S::*member) {
  return {prefix, member};
}
template <class S, class M>
constexpr UnlistedRow<S, M> unlisted(M S::*member) {
  return {member};
}

namespace field_table_detail {

// Converts to anything, so S{AnyValue, ...} compiles with up to as many
// values as S has members (each initializes one member; a nested struct
// takes one value too, since the value converts to it whole).
struct AnyValue {
  template <class T>
  operator T() const;
};

template <class S, size_t... I>
constexpr bool initializable_from(std::index_sequence<I...>) {
  return requires { S{(void(I), AnyValue{})...}; };
}

template <class A, class B>
constexpr bool same_member(const A& a, const B& b) {
  if constexpr (std::is_same_v<decltype(a.member), decltype(b.member)>)
    return a.member == b.member;
  else
    return false;
}

// How many of `rows` name the member that `row` names.
template <class Row, class... Rows>
constexpr int times_listed(const Row& row, const std::tuple<Rows...>& rows) {
  return std::apply([&](const auto&... other) { return (0 + ... + int(same_member(row, other))); }, rows);
}

inline std::string joined(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  if (name.empty()) return std::string(prefix);
  return std::string(prefix) + "_" + std::string(name);
}

}  // namespace field_table_detail

// How many members the aggregate S has.
template <class S, size_t N = 0>
constexpr size_t member_count() {
  if constexpr (field_table_detail::initializable_from<S>(std::make_index_sequence<N + 1>()))
    return member_count<S, N + 1>();
  else
    return N;
}

// True when `rows` name every member of S exactly once.
template <class S, class... Rows>
constexpr bool covers_every_member(const std::tuple<Rows...>& rows) {
  const bool each_once = std::apply(
      [&](const auto&... row) { return (true && ... && (field_table_detail::times_listed(row, rows) == 1)); }, rows);
  return each_once && sizeof...(Rows) == member_count<S>();
}

// Calls f(name, value, shown_as) for every listed member of `s` in row
// order, a nested struct's rows in its place. The rows of a type T are
// found as field_rows(std::type_identity<T>{}), next to T.
template <class S, class F>
void for_each_field(const S& s, F&& f, std::string_view prefix = {});

namespace field_table_detail {

template <class S, class M, class F>
void visit(const S& s, const FieldRow<S, M>& row, F& f, std::string_view prefix) {
  f(joined(prefix, row.name), s.*row.member, row.shown_as);
}
template <class S, class M, class F>
void visit(const S& s, const NestedRows<S, M>& row, F& f, std::string_view prefix) {
  for_each_field(s.*row.member, f, joined(prefix, row.prefix));
}
template <class S, class M, class F>
void visit(const S&, const UnlistedRow<S, M>&, F&, std::string_view) {}

}  // namespace field_table_detail

template <class S, class F>
void for_each_field(const S& s, F&& f, std::string_view prefix) {
  std::apply([&](const auto&... row) { (field_table_detail::visit(s, row, f, prefix), ...); },
             field_rows(std::type_identity<S>{}));
}

}  // namespace eq::model

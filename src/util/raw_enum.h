// Reads an enum field of a struct the application filled in, as an int.
// The application may have stored any value there, and in C++ loading an
// out-of-range value through the enum type is undefined behaviour (UBSan
// reports it). Validate the int, then convert.
#pragma once

#include <cstring>
#include <type_traits>

namespace sv {

template <typename E>
int raw_enum(const E& field) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

}  // namespace sv

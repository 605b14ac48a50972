// The small parsers every "key = value" knob needs: SOFTVERBS_PROFILE files and
// SOFTVERBS_FAULTS rules read their fields the same way, so a number or a
// blank means one thing in both.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace sv {

// Without blanks, tabs and a DOS line end at either side.
inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A whole field as a number, decimal or 0x hex, as ibv_devinfo prints them.
inline bool parse_u64(std::string_view v, uint64_t* out) {
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out, base);
  return !v.empty() && ec == std::errc() && end == v.data() + v.size();
}

// A whole field as a decimal fraction ("0.01", "2.5").
inline bool parse_real(std::string_view v, double* out) {
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return !v.empty() && ec == std::errc() && end == v.data() + v.size();
}

}  // namespace sv

// Reads /proc/self/maps: which mapping backs each address. Memory
// registration uses it to decide whether pages can be overlaid with a
// shareable mapping, and to find overlays that the application unmapped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sv {

struct MapEntry {
  uint64_t start = 0, end = 0;  // [start, end)
  bool read = false, write = false, exec = false, shared = false;
  uint64_t offset = 0;          // file offset of `start`
  uint64_t inode = 0;
  std::string path;             // "" for anonymous, "[heap]", "/memfd:x (deleted)", ...
};

// All mappings of this process, sorted by address. Empty on failure.
std::vector<MapEntry> read_proc_maps();

}  // namespace sv

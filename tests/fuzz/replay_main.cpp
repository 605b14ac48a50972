// The fuzz targets in the ordinary build: each file of the corpus
// directories given goes once through LLVMFuzzerTestOneInput, as libFuzzer
// would run it, so the corpus (and every crash's reproducer kept in it)
// stays exercised by the README's test command. Fails on an empty corpus:
// a replay of nothing proves nothing.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t files = 0;
  for (int i = 1; i < argc; ++i)
    for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++files;
    }
  std::printf("%zu corpus files replayed\n", files);
  return files > 0 ? 0 : 1;
}

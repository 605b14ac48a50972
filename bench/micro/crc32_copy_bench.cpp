// Whether the sender should compute the ICRC while it gathers the payload
// (issue 37 item 3). The sender copies each payload from registered memory
// into the packet, then ISA-L computes the CRC-32 over the copy (TwoPasses,
// what src/net does). A copy that folds the CRC as it goes (OnePass: a
// prototype, PCLMUL folding four 128-bit lanes, checked against zlib before
// anything is timed) reads the payload once; it can save at most what the
// copy costs (CopyOnly), since the payload is in cache when ISA-L reads it.
// Payloads are taken in order from a 1 MiB buffer, as ib_write_bw -s 1M
// sends one.
//   crc32_copy_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <isa-l/crc.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

#define SV_PCLMUL __attribute__((target("pclmul,sse4.1")))

// Bytes [at, at + 16) of src, stored to dst on the way.
SV_PCLMUL inline __m128i load_store(uint8_t* dst, const uint8_t* src, size_t at) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + at), v);
  return v;
}

// x folded forward by the distance k's constants say, onto `next`.
SV_PCLMUL inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

// The folding of "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ" (Intel, 2009) for the reflected polynomial 0x1db710641, as
// zlib and ISA-L use it: four 128-bit lanes folded 64 bytes at a time,
// then folded to one lane, to 64 bits, and reduced to 32 (Barrett). Each
// block is stored to `dst` as it is loaded. `s` is the CRC register
// (zlib's crc, complemented); len >= 64 and a multiple of 16.
SV_PCLMUL uint32_t fold_copy(uint32_t s, uint8_t* dst, const uint8_t* src,
                                                             size_t len) {
  alignas(16) static const uint64_t k1k2[2] = {0x0154442bd4, 0x01c6e41596};  // x^(4*128+32), x^(4*128-32) mod P
  alignas(16) static const uint64_t k3k4[2] = {0x01751997d0, 0x00ccaa009e};  // x^(128+32), x^(128-32) mod P
  alignas(16) static const uint64_t k5k0[2] = {0x0163cd6124, 0};              // x^64 mod P
  alignas(16) static const uint64_t poly[2] = {0x01db710641, 0x01f7011641};   // P, and mu = x^64 / P
  __m128i x1 = _mm_xor_si128(load_store(dst, src, 0), _mm_cvtsi32_si128(static_cast<int>(s)));
  __m128i x2 = load_store(dst, src, 16), x3 = load_store(dst, src, 32), x4 = load_store(dst, src, 48);
  size_t at = 64;
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  for (; len - at >= 64; at += 64) {
    x1 = fold(x1, k, load_store(dst, src, at));
    x2 = fold(x2, k, load_store(dst, src, at + 16));
    x3 = fold(x3, k, load_store(dst, src, at + 32));
    x4 = fold(x4, k, load_store(dst, src, at + 48));
  }
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold(x1, k, x2);
  x1 = fold(x1, k, x3);
  x1 = fold(x1, k, x4);
  for (; len - at >= 16; at += 16) x1 = fold(x1, k, load_store(dst, src, at));
  // 128 bits to 64.
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i x2b = _mm_clmulepi64_si128(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2b);
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2b = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k, 0x00), x2b);
  // Barrett reduction to 32 bits.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2b = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k, 0x10);
  x2b = _mm_clmulepi64_si128(_mm_and_si128(x2b, low32), k, 0x00);
  x1 = _mm_xor_si128(x1, x2b);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

// zlib's crc32(crc, src, len), copying src to dst on the way.
uint32_t crc32_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t len) {
  if (len >= 64) {
    const size_t folded = len & ~size_t{15};
    crc = ~fold_copy(~crc, dst, src, folded);
    dst += folded;
    src += folded;
    len -= folded;
  }
  if (!len) return crc;
  std::memcpy(dst, src, len);
  return crc32_gzip_refl(crc, dst, len);
}

// The prototype against zlib, every length to 300 and packet sizes, before
// it is timed: a fast wrong CRC would prove nothing.
bool prototype_is_right() {
  std::mt19937 rng(1);
  std::vector<uint8_t> src(9100), dst(9100);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lens;
  for (size_t n = 0; n <= 300; ++n) lens.push_back(n);
  for (size_t n : {1024, 1500, 4096, 4100, 9000}) lens.push_back(n);
  for (size_t n : lens)
    for (uint32_t start : {0u, 0xdeadbeefu}) {
      const uint32_t want = static_cast<uint32_t>(crc32(start, src.data() + 3, static_cast<uInt>(n)));
      if (crc32_copy(start, dst.data() + 1, src.data() + 3, n) != want || std::memcmp(dst.data() + 1, src.data() + 3, n))
        return std::fprintf(stderr, "the prototype is wrong at length %zu\n", n), false;
    }
  return true;
}

struct Source {
  std::vector<uint8_t> mr = std::vector<uint8_t>(1 << 20, 0x5a);
  std::vector<uint8_t> packet = std::vector<uint8_t>(9000);
  size_t at = 0;
  const uint8_t* next(size_t len) {
    if (at + len > mr.size()) at = 0;
    const uint8_t* p = mr.data() + at;
    at += len;
    return p;
  }
};

void TwoPasses(benchmark::State& state) {
  Source s;
  const size_t len = static_cast<size_t>(state.range(0));
  uint32_t crc = 0;
  for (auto _ : state) {
    std::memcpy(s.packet.data(), s.next(len), len);
    crc = crc32_gzip_refl(crc, s.packet.data(), len);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

void OnePass(benchmark::State& state) {
  Source s;
  const size_t len = static_cast<size_t>(state.range(0));
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = crc32_copy(crc, s.packet.data(), s.next(len), len);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

void CopyOnly(benchmark::State& state) {
  Source s;
  const size_t len = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    std::memcpy(s.packet.data(), s.next(len), len);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

}  // namespace

BENCHMARK(TwoPasses)->Arg(1024)->Arg(4096);
BENCHMARK(OnePass)->Arg(1024)->Arg(4096);
BENCHMARK(CopyOnly)->Arg(1024)->Arg(4096);

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.1"))
    return std::puts("no PCLMUL here: nothing to compare"), 0;
  if (!prototype_is_right()) return 1;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

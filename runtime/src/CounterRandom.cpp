// A counter-based random generator: each draw is a pure function of its key
// and counter, so parameter elements can be filled in any order or thread.
#include "CounterRandom.h"

#include "megrt/Fnv1a.h"

#include "DeterministicMath.h"

#include <cmath>

namespace megrt {
namespace {
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
} // namespace

uint64_t splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hashName(std::string_view name) {
  return fnv1a(name.data(), name.size());
}

// Mixing the seed before combining keeps nearby seeds and streams from
// producing shifted copies of one Weyl sequence.
CounterRandom::CounterRandom(uint64_t seed, uint64_t stream)
    : key_(splitmix64(splitmix64(seed + kGolden) ^ stream)) {}

uint64_t CounterRandom::bits(uint64_t counter) const {
  return splitmix64(key_ + (counter + 1) * kGolden);
}

double CounterRandom::uniform(uint64_t counter) const {
  return static_cast<double>(bits(counter) >> 11) * 0x1p-53;
}

double CounterRandom::normal(uint64_t index) const {
  // u1 in (0, 1] keeps the logarithm finite.
  double u1 = static_cast<double>((bits(2 * index) >> 11) + 1) * 0x1p-53;
  double u2 = uniform(2 * index + 1);
  return std::sqrt(-2.0 * deterministicLog(u1)) * deterministicCos2Pi(u2);
}

} // namespace megrt

// A counter-based random generator: each draw is a pure function of its key
// and counter, so parameter elements can be filled in any order or thread.
#ifndef MEGRT_SRC_COUNTERRANDOM_H
#define MEGRT_SRC_COUNTERRANDOM_H

#include <cstdint>
#include <string_view>

namespace megrt {

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective mix
/// that passes BigCrush when applied to a Weyl sequence.
uint64_t splitmix64(uint64_t x);

/// FNV-1a, to key streams by parameter name.
uint64_t hashName(std::string_view name);

class CounterRandom {
public:
  CounterRandom(uint64_t seed, uint64_t stream);

  /// 64 random bits for `counter`.
  uint64_t bits(uint64_t counter) const;
  /// Uniform in [0, 1) with 53 random bits.
  double uniform(uint64_t counter) const;
  /// Standard normal by Box-Muller from counters 2*index and 2*index+1.
  double normal(uint64_t index) const;

private:
  uint64_t key_;
};

} // namespace megrt

#endif // MEGRT_SRC_COUNTERRANDOM_H

// Whether this CPU has the instruction-set extensions an artifact's CPU
// code was compiled for.
#include "megrt/CpuFeatures.h"

#include "Fail.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace megrt {
namespace {

/// __builtin_cpu_supports takes string literals only.
bool hostHas(const std::string &feature) {
#if defined(__x86_64__)
  __builtin_cpu_init();
#define MEGRT_CPU_FEATURE(name)                                                \
  if (feature == name)                                                         \
    return __builtin_cpu_supports(name);
  MEGRT_CPU_FEATURE("sse3") MEGRT_CPU_FEATURE("ssse3")
  MEGRT_CPU_FEATURE("sse4.1") MEGRT_CPU_FEATURE("sse4.2")
  MEGRT_CPU_FEATURE("popcnt") MEGRT_CPU_FEATURE("avx")
  MEGRT_CPU_FEATURE("avx2") MEGRT_CPU_FEATURE("fma")
  MEGRT_CPU_FEATURE("f16c") MEGRT_CPU_FEATURE("bmi")
  MEGRT_CPU_FEATURE("bmi2") MEGRT_CPU_FEATURE("lzcnt")
  MEGRT_CPU_FEATURE("movbe") MEGRT_CPU_FEATURE("adx")
  MEGRT_CPU_FEATURE("aes") MEGRT_CPU_FEATURE("pclmul")
  MEGRT_CPU_FEATURE("vpclmulqdq") MEGRT_CPU_FEATURE("vaes")
  MEGRT_CPU_FEATURE("gfni") MEGRT_CPU_FEATURE("sha")
  MEGRT_CPU_FEATURE("avx512f") MEGRT_CPU_FEATURE("avx512bw")
  MEGRT_CPU_FEATURE("avx512cd") MEGRT_CPU_FEATURE("avx512dq")
  MEGRT_CPU_FEATURE("avx512vl") MEGRT_CPU_FEATURE("avx512vbmi")
  MEGRT_CPU_FEATURE("avx512vbmi2") MEGRT_CPU_FEATURE("avx512vnni")
  MEGRT_CPU_FEATURE("avx512bitalg") MEGRT_CPU_FEATURE("avx512vpopcntdq")
  MEGRT_CPU_FEATURE("avx512ifma") MEGRT_CPU_FEATURE("avx512bf16")
  MEGRT_CPU_FEATURE("avx512fp16") MEGRT_CPU_FEATURE("avxvnni")
#undef MEGRT_CPU_FEATURE
#endif
  return false;
}

/// Whether MEGRT_DISABLE_CPU_FEATURES (a comma-separated list) names
/// `feature`: megrt then treats it as absent, as on an older CPU.
bool disabled(const std::string &feature) {
  const char *list = std::getenv("MEGRT_DISABLE_CPU_FEATURES");
  if (!list)
    return false;
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');)
    if (name == feature)
      return true;
  return false;
}

} // namespace

std::vector<std::string>
missingCpuFeatures(const std::vector<std::string> &required) {
  std::vector<std::string> missing;
  for (const std::string &feature : required) {
    bool known = false;
    for (const char *name : kCheckableCpuFeatures)
      known |= feature == name;
    if (!known)
      fail("the CPU code needs the instruction-set extension '", feature,
           "', which this runtime cannot check; recompile the model with "
           "--cpu=x86-64");
    if (!hostHas(feature) || disabled(feature))
      missing.push_back(feature);
  }
  return missing;
}

} // namespace megrt

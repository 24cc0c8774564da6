// The x86-64 instruction-set extensions that an artifact's CPU code may be
// compiled for (megc --cpu=native), named as LLVM and GCC's
// __builtin_cpu_supports both name them, so that the runtime can check each
// one on the host before it loads the code.
#ifndef MEGRT_CPUFEATURES_H
#define MEGRT_CPUFEATURES_H

#include <string>
#include <vector>

namespace megrt {

inline constexpr const char *kCheckableCpuFeatures[] = {
    "sse3",        "ssse3",        "sse4.1",       "sse4.2",
    "popcnt",      "avx",          "avx2",         "fma",
    "f16c",        "bmi",          "bmi2",         "lzcnt",
    "movbe",       "adx",          "aes",          "pclmul",
    "vpclmulqdq",  "vaes",         "gfni",         "sha",
    "avx512f",     "avx512bw",     "avx512cd",     "avx512dq",
    "avx512vl",    "avx512vbmi",   "avx512vbmi2",  "avx512vnni",
    "avx512bitalg", "avx512vpopcntdq", "avx512ifma", "avx512bf16",
    "avx512fp16",  "avxvnni"};

/// The features of `required` this CPU lacks, in order; the environment
/// variable MEGRT_DISABLE_CPU_FEATURES (comma-separated names) makes the
/// ones it lists count as lacking, to check on any machine that an
/// artifact would be refused by an older CPU. Throws megrt::Error for a
/// name outside kCheckableCpuFeatures.
std::vector<std::string>
missingCpuFeatures(const std::vector<std::string> &required);

} // namespace megrt

#endif // MEGRT_CPUFEATURES_H

// The runtime's kernels in the stand-in, found by name among the host
// builds this library exports, with the launch contract of their family.
#include "RuntimeKernels.h"

#include "cuda/attention/FlashAttentionParams.h"
#include "cuda/embedding/EmbeddingGradParams.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>

namespace megemu::standin {
namespace {

template <typename Params> void callHostBuild(void *symbol, const void *params) {
  Params copy;
  std::memcpy(&copy, params, sizeof(Params));
  reinterpret_cast<void (*)(Params)>(symbol)(copy);
}

/// This library's own exported symbol `name` (a host-built kernel).
void *ownSymbol(const std::string &name) {
  static void *self = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<void *>(&findRuntimeKernel), &info);
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }();
  return self ? dlsym(self, name.c_str()) : nullptr;
}

bool startsWith(const std::string &text, const char *prefix) {
  return text.rfind(prefix, 0) == 0;
}

/// The head-dimension tier an attention kernel's name ends with.
int tierOf(const std::string &name) {
  size_t at = name.rfind("_d");
  return at == std::string::npos ? 0 : std::atoi(name.c_str() + at + 2);
}

} // namespace

std::string RuntimeKernel::check(void **params, const LaunchConfig &config,
                                 const State &state) const {
  if (config.block.count() > maxThreads)
    return "block of " + std::to_string(config.block.count()) +
           " threads; its __launch_bounds__ allow " +
           std::to_string(maxThreads);
  if (config.dynamicSharedBytes != sharedBytes)
    return std::to_string(config.dynamicSharedBytes) +
           " bytes of dynamic shared memory; it needs " +
           std::to_string(sharedBytes);
  for (unsigned i = 0; i < pointers; ++i) {
    uint64_t address;
    std::memcpy(&address, static_cast<const uint8_t *>(params[0]) + 8 * i, 8);
    if (address && state.bytesFrom(address) == 0)
      return "pointer " + std::to_string(i) +
             " of its parameters lies in no allocation";
  }
  return "";
}

std::vector<uint8_t> RuntimeKernel::copyParams(void **params) const {
  const auto *bytes = static_cast<const uint8_t *>(params[0]);
  return std::vector<uint8_t>(bytes, bytes + paramBytes);
}

void RuntimeKernel::run(const uint8_t *params,
                        const LaunchConfig &config) const {
  launchHost(name, config, [&] { call(symbol, params); });
}

const RuntimeKernel *findRuntimeKernel(const std::string &name) {
  static std::map<std::string, std::unique_ptr<RuntimeKernel>> found;
  std::unique_ptr<RuntimeKernel> &slot = found[name];
  if (slot)
    return slot.get();
  void *symbol = ownSymbol(name);
  if (!symbol)
    return nullptr;
  auto kernel = std::make_unique<RuntimeKernel>();
  kernel->name = name;
  kernel->symbol = symbol;
  if (startsWith(name, "megrt_attention_")) {
    using megrt::attention::AttentionParams;
    kernel->call = &callHostBuild<AttentionParams>;
    kernel->paramBytes = sizeof(AttentionParams);
    kernel->pointers = 12;
    kernel->maxThreads = megrt::attention::kThreads;
    int tier = tierOf(name);
    kernel->sharedBytes =
        startsWith(name, "megrt_attention_bwd_kv_")
            ? megrt::attention::backwardSharedBytes(tier)
        : startsWith(name, "megrt_attention_bwd_dq_")
            ? 0
            : megrt::attention::forwardSharedBytes(tier);
  } else if (startsWith(name, "megrt_embedding_grad_")) {
    using megrt::embedding::EmbeddingGradParams;
    kernel->call = &callHostBuild<EmbeddingGradParams>;
    kernel->paramBytes = sizeof(EmbeddingGradParams);
    kernel->pointers = 7;
    kernel->maxThreads = name == "megrt_embedding_grad_scan"
                             ? megrt::embedding::kScanThreads
                             : megrt::embedding::kThreads;
    kernel->sharedBytes = 0;
  } else {
    return nullptr;
  }
  slot = std::move(kernel);
  return slot.get();
}

} // namespace megemu::standin

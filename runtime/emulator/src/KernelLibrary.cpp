// A kernel library: a shared object of kernels lowered for emulation, its
// manifest read and its hook table bound to this emulator.
#include "LaunchContext.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>

namespace megemu {

KernelLibrary::KernelLibrary(const std::string &path) : path_(path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_)
    throw EmulationError("kernel library '" + path + "': " + dlerror());
  auto fail = [&](const std::string &what) {
    dlclose(handle_);
    handle_ = nullptr;
    throw EmulationError("kernel library '" + path + "': " + what);
  };
  const auto *manifest =
      static_cast<const char *>(dlsym(handle_, kManifestSymbol));
  auto **hooks = static_cast<void **>(dlsym(handle_, kHooksSymbol));
  if (!manifest || !hooks)
    fail(std::string("no ") + kManifestSymbol + " or " + kHooksSymbol +
         ": not a library of emulated kernels (megc --emit=cuda-emulation)");
  nlohmann::json json = nlohmann::json::parse(manifest, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    fail("its manifest is not JSON");
  if (json.value("abi", 0) != kAbiVersion)
    fail("made for emulator interface " + std::to_string(json.value("abi", 0)) +
         ", this emulator has " + std::to_string(kAbiVersion));
  try {
    for (const nlohmann::json &entry : json.at("kernels")) {
      KernelInfo kernel;
      kernel.name = entry.at("name").get<std::string>();
      kernel.args = entry.at("args").get<unsigned>();
      kernel.extents = entry.at("extents").get<std::vector<int64_t>>();
      for (const nlohmann::json &buffer : entry.at("workgroup"))
        kernel.workgroup.push_back({buffer.at("bytes").get<uint64_t>(),
                                    buffer.at("align").get<uint64_t>()});
      std::string symbol = kernel.name + kEntrySuffix;
      kernel.entry = reinterpret_cast<void (*)(void **)>(
          dlsym(handle_, symbol.c_str()));
      if (!kernel.entry)
        fail("the manifest lists kernel '" + kernel.name + "', but " + symbol +
             " is missing");
      if (kernel.extents.size() != kernel.args)
        fail("kernel '" + kernel.name + "' lists " +
             std::to_string(kernel.extents.size()) + " extents for " +
             std::to_string(kernel.args) + " arguments");
      kernels_.push_back(std::move(kernel));
    }
    sites_ = json.at("sites").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception &e) {
    fail(std::string("malformed manifest: ") + e.what());
  }
  for (int hook = 0; hook < kHookCount; ++hook)
    hooks[hook] = hookAddress(static_cast<Hook>(hook));
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    dlclose(handle_);
}

const KernelInfo *KernelLibrary::find(const std::string &name) const {
  for (const KernelInfo &kernel : kernels_)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

std::string KernelLibrary::site(int32_t index) const {
  if (index >= 0 && static_cast<size_t>(index) < sites_.size())
    return sites_[index];
  return "site " + std::to_string(index);
}

} // namespace megemu

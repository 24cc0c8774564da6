// Sets or unsets environment variables for the life of a test and then
// restores them.
#ifndef MEGRT_TEST_COMM_SCOPEDENVIRONMENT_H
#define MEGRT_TEST_COMM_SCOPEDENVIRONMENT_H

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megrt::test {

class ScopedEnvironment {
public:
  ScopedEnvironment() = default;
  ScopedEnvironment(const ScopedEnvironment &) = delete;
  ScopedEnvironment &operator=(const ScopedEnvironment &) = delete;
  ~ScopedEnvironment() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

  void set(const std::string &name, const std::string &value) {
    save(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string &name) {
    save(name);
    unsetenv(name.c_str());
  }
  /// Unsets every variable that tells megrt it runs under a launcher.
  void clearLauncher() {
    for (const char *name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                             "PMI_SIZE", "PMI_RANK", "MEGRT_COMM_TIMEOUT"})
      unset(name);
  }

private:
  void save(const std::string &name) {
    const char *value = std::getenv(name.c_str());
    saved_.emplace_back(name, value ? std::optional<std::string>(value)
                                    : std::nullopt);
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

} // namespace megrt::test

#endif // MEGRT_TEST_COMM_SCOPEDENVIRONMENT_H

// Temporary files for tests that read and write artifacts and tensors.
#include "TestFiles.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <stdexcept>
#include <unistd.h>

namespace megrt::test {

namespace {
/// Removes every file handed out by tempPath when the test process exits.
struct TempFiles {
  ~TempFiles() {
    for (const std::string &path : paths)
      std::remove(path.c_str());
  }
  std::vector<std::string> paths;
};

TempFiles &tempFiles() {
  static TempFiles files;
  return files;
}
} // namespace

std::string tempPath(const std::string &name) {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test =
      info ? std::string(info->test_suite_name()) + "." + info->name()
           : "global";
  std::string path = ::testing::TempDir() + "megrt-" +
                     std::to_string(::getpid()) + "-" + test + "-" + name;
  tempFiles().paths.push_back(path);
  return path;
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> testValues(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed * 2654435761u + 1u;
  for (float &value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) * 0x1p-23f - 1.0f;
  }
  return values;
}

} // namespace megrt::test

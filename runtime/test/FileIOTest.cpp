// writeFile replaces a file atomically: a writer killed mid-write, or one
// that fails, leaves the previous file as it was.
#include "FileIO.h"
#include "TestFiles.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

/// Size of `path`, or -1 when there is none.
long long sizeOf(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 ? info.st_size : -1;
}

TEST(WriteFile, ReplacesTheFileWhole) {
  std::string path = tempPath("whole.bin");
  writeBytes(path, {1, 2, 3});
  std::vector<uint8_t> a(1000, 7), b(24, 9);
  writeFile(path, {{a.data(), a.size()}, {b.data(), b.size()}});
  std::vector<uint8_t> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(readBytes(path), expected);
  EXPECT_EQ(sizeOf(path.substr(0, path.rfind('/') + 1) + ".whole.bin.tmp-" +
                   std::to_string(::getpid())),
            -1);
}

// The writer is killed while its data is half written: before it existed
// under a temporary name, `path` would have held the half.
TEST(WriteFile, AKilledWriterLeavesThePreviousFile) {
  std::string path = tempPath("killed.bin");
  std::vector<uint8_t> previous = {4, 5, 6, 7};
  writeBytes(path, previous);
  std::string dir = path.substr(0, path.rfind('/'));
  std::string name = path.substr(path.rfind('/') + 1);

  // 256 MB from one 64 KB block, in chunks: long enough to catch midway.
  static std::vector<uint8_t> block(64 << 10, 0xab);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<std::pair<const void *, size_t>> chunks(
        4096, {block.data(), block.size()});
    writeFile(path, chunks);
    ::_exit(0);
  }
  std::string temporary = dir + "/." + name + ".tmp-" + std::to_string(child);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sizeOf(temporary) < (1 << 20) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer finished before the kill";
  EXPECT_EQ(readBytes(path), previous);
  std::remove(temporary.c_str());
}

TEST(WriteFile, AFailedWriteNamesTheFileAndKeepsIt) {
  std::string path = tempPath("kept.bin");
  std::vector<uint8_t> previous = {1, 2};
  writeBytes(path, previous);
  std::string missing = path + ".dir/none/file.bin";
  try {
    uint8_t byte = 0;
    writeFile(missing, {{&byte, 1}});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot open '" + missing + "'"));
  }
  EXPECT_EQ(readBytes(path), previous);
}

} // namespace
} // namespace megrt::test

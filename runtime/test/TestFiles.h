// Temporary files for tests that read and write artifacts and tensors.
#ifndef MEGRT_TEST_TESTFILES_H
#define MEGRT_TEST_TESTFILES_H

#include <cstdint>
#include <string>
#include <vector>

namespace megrt::test {

/// A path in the test temp directory, unique to the running test and `name`;
/// the file is removed when the test process exits.
std::string tempPath(const std::string &name);

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes);
std::vector<uint8_t> readBytes(const std::string &path);

/// Deterministic values in [-1, 1) for test inputs.
std::vector<float> testValues(size_t count, uint32_t seed);

} // namespace megrt::test

#endif // MEGRT_TEST_TESTFILES_H

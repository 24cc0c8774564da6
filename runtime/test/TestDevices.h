// The devices that tests run on, and why one may be unavailable here.
#ifndef MEGRT_TEST_TESTDEVICES_H
#define MEGRT_TEST_TESTDEVICES_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace megrt::test {

/// Every device this runtime supports ("cpu", and "cuda" in a build with CUDA
/// support), for conformance tests that run on each.
std::vector<std::string> testDevices();

/// Why tests cannot run on `device` on this machine (no CUDA driver, no GPU,
/// a GPU older than sm_90, the target of the test PTX), or empty when they
/// can. Tests skip for these reasons only, never for a failing Session.
std::string deviceUnavailable(const std::string &device);

/// Why tests of the runtime's own CUDA kernels cannot run here: the
/// device's reason, or the error of `load` (which makes the tests' shared
/// state, loading the kernels) when it says that the runtime was built
/// without nvcc; any other error of `load` propagates. Empty when they can.
std::string cudaKernelsUnavailable(const std::function<void()> &load);

/// PTX without kernels: the CUDA module of test programs whose commands are
/// only Gemm and Copy.
extern const char *const kEmptyPtx;

/// kEmptyPtx compiled for sm_90 by the toolkit's ptxas when the tests were
/// built (empty if it had none). Defined in builds with CUDA support only.
extern const std::vector<uint8_t> kEmptyModuleCubin;

} // namespace megrt::test

#endif // MEGRT_TEST_TESTDEVICES_H

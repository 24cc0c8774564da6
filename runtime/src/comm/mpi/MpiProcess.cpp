// MPI's state in this process, as the plugin keeps it.
#include "comm/mpi/MpiProcess.h"

#include "Fail.h"
#include "comm/Collective.h"
#include "comm/PeerWatch.h"
#include "comm/mpi/MpiTypes.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace megrt::comm::mpi {
namespace {

struct ProcessState {
  std::mutex mutex;
  bool initialisedHere = false;
  /// Guarded by `mutex`; read without it only at exit.
  std::string brokenReason;
};

ProcessState &state() {
  // Never destroyed: the exit handler and late group destructors use it.
  static ProcessState *process = new ProcessState;
  return *process;
}

void finaliseAtExit() {
  ProcessState &process = state();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (!process.brokenReason.empty()) {
    std::fprintf(stderr,
                 "megrt: %s; aborting the MPI job at exit rather than "
                 "finalising MPI, which would wait for the stalled ranks\n",
                 process.brokenReason.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (process.initialisedHere)
    MPI_Finalize();
}

std::string errorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return concat("MPI error code ", code);
  return std::string(text, length);
}

std::string threadLevelName(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  }
  return concat("thread level ", level);
}

} // namespace

void initialiseMpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    ProcessState &process = state();
    std::lock_guard<std::mutex> lock(process.mutex);
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    if (initialised) {
      MPI_Query_thread(&provided);
    } else {
      int code =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (code != MPI_SUCCESS)
        fail("MPI_Init_thread failed: ", errorString(code));
      process.initialisedHere = true;
    }
    std::atexit(finaliseAtExit);
    if (provided < MPI_THREAD_SERIALIZED)
      fail("MPI provides ", threadLevelName(provided),
           "; megrt calls MPI from whichever thread runs a session and needs "
           "MPI_THREAD_SERIALIZED");
    createHalfFloatTypes();
  });
}

std::unique_lock<std::mutex> lockMpi() {
  return std::unique_lock<std::mutex>(state().mutex);
}

bool mpiFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized;
}

void markMpiBroken(const std::string &reason) {
  std::string &broken = state().brokenReason;
  if (broken.empty())
    broken = reason;
}

bool mpiBroken() { return !state().brokenReason.empty(); }

void checkMpiUsable(const std::string &object) {
  const std::string &broken = state().brokenReason;
  if (!broken.empty())
    fail(object, ": MPI is unusable after an earlier failure (", broken, ")");
}

void checkMpi(int code, const char *call, const std::string &object) {
  if (code == MPI_SUCCESS)
    return;
  std::string message =
      concat(object, ": ", call, " failed: ", errorString(code));
  markMpiBroken(message);
  throw Error(message);
}

void waitForRequest(MPI_Request &request, double timeoutSeconds,
                    const std::string &what) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(timeoutSeconds);
  // Spin briefly for short collectives, then sleep between tests so that
  // ranks oversubscribing the cores leave them to their peers.
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    {
      std::unique_lock<std::mutex> lock = lockMpi();
      checkMpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
    }
    if (done)
      return;
    if (std::optional<std::string> dead = deadPeer()) {
      std::string message = deadPeerMessage(what, *dead);
      std::unique_lock<std::mutex> lock = lockMpi();
      markMpiBroken(message);
      throw Error(message);
    }
    auto now = Clock::now();
    if (now >= deadline) {
      std::string message = timeoutMessage(what, timeoutSeconds);
      std::unique_lock<std::mutex> lock = lockMpi();
      markMpiBroken(message);
      throw Error(message);
    }
    if (now - start < std::chrono::milliseconds(1))
      std::this_thread::yield();
    else {
      pause = std::min(pause + std::chrono::microseconds(50),
                       std::chrono::microseconds(1000));
      std::this_thread::sleep_for(pause);
    }
  }
}

} // namespace megrt::comm::mpi

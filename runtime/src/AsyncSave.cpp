// A training-state save that runs beside training (AsyncSave.h).
#include "AsyncSave.h"

#include "Fail.h"

#include <chrono>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace megrt {

AsyncSave::AsyncSave(const ParameterStore &store, const Program &program,
                     std::string path, bool distributed,
                     std::map<std::string, std::string> metadata,
                     std::vector<uint8_t> staging)
    : store_(store), program_(program), path_(std::move(path)),
      distributed_(distributed), metadata_(std::move(metadata)),
      staging_(std::move(staging)) {
  auto start = std::chrono::steady_clock::now();
  if (distributed_)
    prepareDistributedCheckpoint(store_, path_);
  // On one rank without a mesh every piece is a whole tensor: the snapshot
  // is the whole state.
  snapshot_ = snapshotShard(store_, program_, /*withState=*/true, &staging_);
  snapshotSeconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  writer_ = std::thread([this] {
    // Below the training threads: the write takes what they leave.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
    if (distributed_) {
      outcome_ = writeShard(path_, store_.rank(), snapshot_);
    } else {
      try {
        writeSafetensors(path_, snapshot_.entries, metadata_);
        outcome_ = "ok\n";
      } catch (const std::exception &error) {
        outcome_ = concat("error\n", error.what());
      }
    }
    done_.store(true);
  });
}

AsyncSave::~AsyncSave() {
  if (writer_.joinable())
    writer_.join();
}

void AsyncSave::check() const {
  if (done_.load() && outcome_.rfind("error\n", 0) == 0)
    fail("the checkpoint save started for '", path_,
         "' failed: ", outcome_.substr(6));
}

void AsyncSave::finish() {
  if (writer_.joinable())
    writer_.join();
  if (distributed_) {
    commitDistributedCheckpoint(store_, program_, path_, /*withState=*/true,
                                metadata_, outcome_);
    return;
  }
  check();
}

} // namespace megrt

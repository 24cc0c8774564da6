// One entry of a program prepared for the CPU: arena, input and output
// storage, and its commands with every buffer resolved to an address.
#ifndef MEGRT_SRC_CPU_CPUENTRY_H
#define MEGRT_SRC_CPU_CPUENTRY_H

#include "AttentionShape.h"
#include "CollectiveCommand.h"
#include "Device.h"
#include "GraphRegions.h"
#include "Trace.h"
#include "cpu/CpuGemm.h"
#include "cpu/CpuModule.h"
#include "cpu/ThreadPool.h"
#include "library/LibraryCall.h"
#include "megrt/AlignedBuffer.h"
#include "megrt/Tensor.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <variant>
#include <vector>

namespace megrt {

class CpuEntry {
public:
  /// `parameters` must outlive this entry and never reallocate: buffers
  /// point into them. `groups` (connectGroups; empty for a program
  /// without a mesh) outlive the entry's runs.
  /// Kernels run on `pool` with `scratch` (at least module.scratchBytes()
  /// bytes); both outlive the entry.
  CpuEntry(const fb::Program &program, const fb::Entry &entry,
           std::vector<Tensor> &parameters, const CpuModule &module,
           const SubmeshGroups &groups, const DeviceOptions &options,
           ThreadPool &pool, uint8_t *scratch);

  /// Storage the caller fills before execute() and reads after.
  std::vector<Tensor> &inputs() { return inputs_; }
  std::vector<Tensor> &outputs() { return outputs_; }

  /// Runs every command in order. With graphs, each graph region's command
  /// list is recorded on the first run and replayed on later ones, as a
  /// CUDA device captures and replays it. A run that fails while async
  /// collectives are in flight abandons them, and every later run fails:
  /// their buffers may still be written by the peers' transfers.
  void execute();

  /// Region runs so far that recorded, and that replayed, a command list.
  uint64_t graphRecordings() const { return recordings_; }
  uint64_t graphReplays() const { return replays_; }

private:
  /// One dispatch of a kernel: `grid` workgroups of `entry` on `args`.
  struct Dispatch {
    CpuDispatchFn entry;
    uint32_t grid;
    std::vector<void *> args;
  };
  /// A kernel launch: its dispatches, in order; the kernel's index and its
  /// buffers for the kernel observer.
  struct Launch {
    std::vector<Dispatch> dispatches;
    uint32_t kernel;
    std::vector<KernelArgument> arguments;
  };
  struct Copy {
    const uint8_t *src;
    uint8_t *dst;
    size_t bytes;
  };
  /// The operands of AttentionOperands resolved to addresses.
  struct Attention {
    AttentionShape shape;
    bool backward;
    const uint8_t *q, *k, *v;
    uint8_t *out;
    const uint8_t *gradOut;
    uint8_t *gradQ, *gradK, *gradV;
    /// The softmax statistics the forward writes or the backward reads, or
    /// null.
    float *stats;
    /// The queries' positions, or null.
    const int32_t *positions;
  };
  /// A LibraryCall prepared by its kernel (the scratch is the entry's
  /// libraryScratch_).
  struct LibraryCall {
    CpuLibraryRun run;
  };
  /// Completes the async collective at command `collective`.
  struct Wait {
    uint32_t collective;
  };
  using Command = std::variant<Launch, CpuGemm, Copy, Attention, LibraryCall,
                               CollectiveCall, Wait>;

  uint8_t *resolve(const fb::Buffer &buffer, std::vector<Tensor> &parameters);
  void runCommand(uint32_t index);
  void runRegion(size_t region);
  void run(Command &command);
  /// Runs `work`, adding an event for it to the trace if there is one.
  template <typename Work> void timed(const TraceLabel &label, Work &&work);

  ThreadPool &pool_;
  AlignedBuffer arena_;
  /// The scratch of the library calls (the largest any one needs).
  AlignedBuffer libraryScratch_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<Command> commands_;
  std::vector<GraphRegion> regions_;
  /// Per region, its commands in order once recorded (regions are never
  /// empty).
  std::vector<std::vector<Command *>> recorded_;
  bool graphs_;
  Trace *trace_;
  KernelObserver *observer_;
  /// Only filled when tracing: one label per command, and the entry's.
  std::vector<TraceLabel> commandLabels_;
  TraceLabel entryLabel_;
  uint64_t recordings_ = 0;
  uint64_t replays_ = 0;
  CollectivesInFlight collectives_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUENTRY_H

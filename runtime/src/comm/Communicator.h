// Collective communication between the ranks of a multi-rank run: the world
// of processes started by a launcher (mpirun), and one group per registered
// submesh. MPI carries host buffers; NCCL carries CUDA device buffers.
#ifndef MEGRT_SRC_COMM_COMMUNICATOR_H
#define MEGRT_SRC_COMM_COMMUNICATOR_H

#include "megrt/Collectives.h"
#include "megrt/DType.h"
#include "megrt/Error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megrt::comm {

/// A line of megrt/Collectives.def that communicates (the others are local
/// copies the entries run themselves).
using CollectiveKind = megrt::CollectiveId;

/// Avg divides the sum by the group size.
enum class ReduceOp : uint8_t { Sum = 0, Avg = 1, Max = 2 };

/// Where a group's buffers live.
enum class MemorySpace : uint8_t { Host, Cuda };

const char *collectiveName(CollectiveKind kind);

/// This rank's view of a group of ranks (one registered submesh). One thread
/// at a time uses a group; different groups may be used from different
/// threads.
class Group {
public:
  virtual ~Group() = default;

  /// This rank's index in the group, and the group size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts a collective and returns its handle for wait(). AllGather: src
  /// holds `count` elements, dst size() * count (this rank's part included).
  /// ReduceScatter: src holds size() * count, dst count (this rank's piece).
  /// AllReduce: both hold count (src == dst is allowed). AllToAll: src and
  /// dst hold size() * count, src's i-th count elements go to rank i and
  /// dst's i-th come from rank i (src != dst). src and dst must
  /// stay untouched until wait() returns. For a Cuda group, `stream` is the
  /// CUstream the collective is ordered on; for a Host group it is ignored.
  /// 16-bit floats are reduced with f32 arithmetic.
  virtual uint64_t start(CollectiveKind kind, const void *src, void *dst,
                         size_t count, DType dtype, ReduceOp op,
                         void *stream) = 0;

  /// Starts this rank's part of a point-to-point exchange: `count` elements
  /// of `send` go to the group's rank `sendTo`, and `count` elements from
  /// rank `recvFrom` arrive in `recv`; a side whose rank is -1 is left out
  /// (a pipeline's first and last stage), and each side pairs with the
  /// opposite side of the peer's exchange. Pipeline stages pass activations
  /// and their gradients to their neighbours with it, and a ring passes
  /// blocks around. Returns the handle for wait(), which bounds it by the
  /// timeout and names the peers; the buffers stay untouched until then.
  /// For a Cuda group, `stream` is the CUstream it is ordered on.
  virtual uint64_t startExchange(const void *send, int sendTo, void *recv,
                                 int recvFrom, size_t count, DType dtype,
                                 void *stream) = 0;

  /// One side of a point-to-point transfer in a batch (startTransfers):
  /// `count` elements of `send` to the group's rank `peer`, or (send null)
  /// `count` elements from it into `recv`.
  struct Transfer {
    const void *send;
    void *recv;
    int peer;
    size_t count;
    DType dtype;
  };

  /// Starts the transfers together, as one exchange: each pairs with the
  /// opposite side on its peer, and none needs another's peer to have
  /// reached its own transfer first. A pipeline rank issues the sends and
  /// receives between two of its passes so (as Megatron's batched
  /// point-to-point calls do): NCCL may hold a send until its receive is
  /// posted, so a send and a receive issued one after the other could wait
  /// on a neighbour that does the same. Returns one handle per transfer,
  /// in order; transfers sharing a handle complete together and are waited
  /// for once. The default starts each as its own exchange, which suits a
  /// communicator whose sends never wait for their receives (MPI's Isend).
  virtual std::vector<uint64_t>
  startTransfers(const std::vector<Transfer> &transfers, void *stream);

  /// Completes a started collective. For a Cuda group the host blocks until
  /// the collective's work on the GPU is done (so not while the stream is
  /// being captured into a CUDA graph); later work on the stream follows it
  /// anyway. Throws megrt::Error naming the collective, the group and the
  /// timeout when it does not complete in time, or when a peer failed;
  /// after a timeout the group (an MPI world: every group) is unusable, and
  /// an MPI process aborts the job at exit instead of finalising MPI.
  virtual void wait(uint64_t handle) = 0;

  /// Enqueues the collective on `stream` (a CUstream) while the stream is
  /// being captured into a CUDA graph: the stream orders it with the
  /// graph's other work and each launch of the graph runs it, so there is
  /// nothing to wait for. Only Cuda groups (NCCL) can; the others throw
  /// megrt::Error.
  virtual void enqueueCaptured(CollectiveKind kind, const void * /*src*/,
                               void * /*dst*/, size_t /*count*/,
                               DType /*dtype*/, ReduceOp /*op*/,
                               void * /*stream*/) {
    throw Error(std::string("a ") + collectiveName(kind) +
                " over a group of host buffers cannot be captured into a "
                "CUDA graph (only NCCL collectives can)");
  }

  /// start() then wait().
  void run(CollectiveKind kind, const void *src, void *dst, size_t count,
           DType dtype, ReduceOp op, void *stream) {
    wait(start(kind, src, dst, count, dtype, op, stream));
  }
};

struct WorldOptions {
  /// How long a collective, a split or a broadcast may take before this
  /// rank gives up with an error (a peer died or stalled). The environment
  /// variable MEGRT_COMM_TIMEOUT (seconds) overrides the default.
  double timeoutSeconds = 300;
};

/// The processes of the run.
class World {
public:
  virtual ~World() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The rank among the processes of this host (selects the CUDA device).
  virtual int localRank() const = 0;
  /// "single process", "MPI (Open MPI 4.1.4)", ... for messages.
  virtual std::string describe() const = 0;

  /// Collective over the world, like MPI_Comm_split: the ranks passing the
  /// same color (>= 0) form a group, ordered by key. The group carries
  /// buffers of `space`. Cuda groups use NCCL, bootstrapped through this
  /// world (a world of one included), on the CUDA context current on the
  /// calling thread, which must stay current for the group's collectives.
  virtual std::unique_ptr<Group> split(int color, int key,
                                       MemorySpace space) = 0;

  /// Host-memory helpers over the whole world (blocking, with the timeout).
  virtual void broadcast(void *data, size_t bytes, int root) = 0;
  /// out (size() * bytes, on every rank) receives every rank's `in`.
  virtual void allGatherBytes(const void *in, void *out, size_t bytes) = 0;
  virtual void barrier() = 0;
};

/// Connects to the launcher's world: Open MPI (OMPI_COMM_WORLD_SIZE/RANK/
/// LOCAL_RANK) or a PMI launcher (PMI_SIZE/PMI_RANK); without a launcher, or
/// with a world of one, a single-process world that needs no MPI. MPI is
/// loaded at run time (the megrt_mpi plugin, from $MEGRT_MPI_PLUGIN if set,
/// else the build tree, else the install's libdir); its absence is an error
/// only for a world of more than one rank. The world lives until the process
/// exits (MPI cannot be initialised twice); later calls return the same one
/// and ignore their options.
World &connectWorld(const WorldOptions &options = {});

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_COMMUNICATOR_H

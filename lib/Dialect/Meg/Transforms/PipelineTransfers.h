//===- PipelineTransfers.h - the pipeline ranks' transfers -----*- C++ -*-===//
//
// The rendezvous model of meg-pipeline-split's point-to-point transfers (a
// send may wait until its receive is posted, as NCCL's may), by which the
// split orders a rank's receives and its verifier rejects programs whose
// ranks would wait on each other; and that verifier.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_TRANSFORMS_PIPELINETRANSFERS_H
#define MEGC_LIB_DIALECT_MEG_TRANSFORMS_PIPELINETRANSFERS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mlir::meg {

/// One side of a transfer in a rank's batch: the peer, and whether it
/// sends.
struct BatchSide {
  int64_t peer;
  bool send;
};

/// Where a side waits: its rank, its batch in the rank's sequence, its
/// index in the batch.
struct BlockedSide {
  int64_t rank;
  size_t batch, side;
  /// The batch its peer has reached.
  size_t peerBatch;
};

/// Plays out the ranks' transfers where a send may wait until its receive
/// is posted (as NCCL's may): each rank issues its batches (per rank, in
/// order) one at a time, and a side completes once its peer's matching side
/// (the same order among that pair's transfers) is in the batch the peer
/// has reached. Returns a side left waiting, a send where one is, or none
/// when every batch completes.
std::optional<BlockedSide>
findBlockedSide(ArrayRef<std::vector<SmallVector<BatchSide>>> batches);

/// Every rank's programs of an entry (made here or written by hand): one
/// per rank, and what each rank sends another the other receives, in the
/// same order and of the same types.
LogicalResult verifyPipelineTransfers(ModuleOp module, int64_t ranks);

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_TRANSFORMS_PIPELINETRANSFERS_H

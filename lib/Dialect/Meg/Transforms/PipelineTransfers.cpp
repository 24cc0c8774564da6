//===- PipelineTransfers.cpp - the pipeline ranks' transfers ------------===//
//
// The rendezvous model of the pipeline's transfers and the verifier of the
// rank programs meg-pipeline-split makes or a user writes
// (PipelineTransfers.h).
//
//===----------------------------------------------------------------------===//

#include "PipelineTransfers.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <set>
#include <string>

using namespace mlir;
using namespace mlir::meg;

std::optional<BlockedSide> mlir::meg::findBlockedSide(
    ArrayRef<std::vector<SmallVector<BatchSide>>> batches) {
  struct Where {
    size_t batch, side;
  };
  int64_t ranks = batches.size();
  // Per (rank, peer, send): where each of its sides is, in order.
  std::map<std::tuple<int64_t, int64_t, bool>, std::vector<Where>> sidesOf;
  std::vector<std::vector<std::vector<size_t>>> orderOf(ranks);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    orderOf[rank].resize(batches[rank].size());
    for (auto [b, batch] : llvm::enumerate(batches[rank]))
      for (auto [i, side] : llvm::enumerate(batch)) {
        std::vector<Where> &list = sidesOf[{rank, side.peer, side.send}];
        orderOf[rank][b].push_back(list.size());
        list.push_back({b, i});
      }
  }
  std::vector<size_t> head(ranks, 0);
  std::vector<std::vector<std::vector<bool>>> done(ranks);
  for (int64_t rank = 0; rank < ranks; ++rank)
    for (const SmallVector<BatchSide> &batch : batches[rank])
      done[rank].emplace_back(batch.size(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t rank = 0; rank < ranks; ++rank)
      while (head[rank] < batches[rank].size()) {
        size_t b = head[rank];
        bool complete = true;
        for (auto [i, side] : llvm::enumerate(batches[rank][b])) {
          if (done[rank][b][i])
            continue;
          const std::vector<Where> &peerSides =
              sidesOf[{side.peer, rank, !side.send}];
          size_t order = orderOf[rank][b][i];
          if (order < peerSides.size() &&
              peerSides[order].batch == head[side.peer]) {
            done[rank][b][i] = true;
            done[side.peer][peerSides[order].batch][peerSides[order].side] =
                true;
          } else {
            complete = false;
          }
        }
        if (!complete)
          break;
        ++head[rank];
        progress = true;
      }
  }
  std::optional<BlockedSide> blocked;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    if (head[rank] == batches[rank].size())
      continue;
    size_t b = head[rank];
    for (auto [i, side] : llvm::enumerate(batches[rank][b]))
      if (!done[rank][b][i] && (!blocked || side.send)) {
        blocked = BlockedSide{rank, b, i, head[side.peer]};
        if (side.send)
          return blocked;
      }
  }
  return blocked;
}

namespace {

/// The ranks' transfers complete even where a send waits until its
/// receive is posted (findBlockedSide).
LogicalResult verifyRendezvous(StringRef name,
                               const std::map<int64_t, func::FuncOp> &byRank) {
  std::vector<std::vector<SmallVector<BatchSide>>> batches(byRank.size());
  std::vector<std::vector<SmallVector<Operation *>>> ops(byRank.size());
  for (auto [rank, program] : byRank) {
    func::FuncOp func = program;
    std::map<int64_t, size_t> batchIndex;
    func.walk([&](Operation *op) {
      auto send = dyn_cast<SendStartOp>(op);
      auto recv = dyn_cast<RecvStartOp>(op);
      if (!send && !recv)
        return;
      std::optional<int64_t> batch = send ? send.getBatch() : recv.getBatch();
      size_t index = batches[rank].size();
      if (batch && batchIndex.count(*batch))
        index = batchIndex[*batch];
      if (index == batches[rank].size()) {
        batches[rank].emplace_back();
        ops[rank].emplace_back();
        if (batch)
          batchIndex[*batch] = index;
      }
      batches[rank][index].push_back(
          {send ? send.getPeer() : recv.getPeer(), bool(send)});
      ops[rank][index].push_back(op);
    });
  }
  std::optional<BlockedSide> blocked = findBlockedSide(batches);
  if (!blocked)
    return success();
  const BatchSide &side = batches[blocked->rank][blocked->batch][blocked->side];
  return ops[blocked->rank][blocked->batch][blocked->side]->emitError()
         << "meg-pipeline-split: entry '" << name << "': pipeline rank "
         << blocked->rank << " and rank " << side.peer
         << " wait on each other here: this "
         << (side.send ? "send" : "receive") << " (in batch " << blocked->batch
         << " of the rank's transfers) may wait until the "
         << (side.send ? "receive" : "send")
         << " matching it is posted (a NCCL send may), which the peer "
            "issues only after transfers of its own that wait for this "
            "rank; issue transfers that cross in one batch "
            "(meg.send_start's batch)";
}

} // namespace

LogicalResult mlir::meg::verifyPipelineTransfers(ModuleOp module,
                                                 int64_t ranks) {
  struct Transfer {
    Operation *op;
    RankedTensorType type;
  };
  // Per entry, per (from, to): the sends and the receives in order.
  std::map<std::string, std::map<int64_t, func::FuncOp>> programs;
  std::map<std::string,
           std::map<std::pair<int64_t, int64_t>, SmallVector<Transfer>>>
      sends, recvs;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto rank =
        func->getAttrOfType<IntegerAttr>(MegDialect::kPipelineRankAttrName);
    if (!rank)
      continue;
    auto name = func->getAttrOfType<StringAttr>(MegDialect::kEntryNameAttrName);
    if (!name)
      return func.emitError() << "meg-pipeline-split: a pipeline rank's "
                                 "program needs its entry's name ("
                              << MegDialect::kEntryNameAttrName << ")";
    int64_t r = rank.getInt();
    if (r >= ranks)
      return func.emitError()
             << "meg-pipeline-split: pipeline rank " << r
             << " is not a rank of the " << ranks << "-rank pipeline group";
    if (!programs[name.str()].try_emplace(r, func).second)
      return func.emitError()
             << "meg-pipeline-split: a second program of entry '"
             << name.getValue() << "' for pipeline rank " << r;
    func.walk([&](Operation *op) {
      if (auto send = dyn_cast<SendStartOp>(op))
        sends[name.str()][{r, send.getPeer()}].push_back(
            {op, send.getProducedType()});
      else if (auto recv = dyn_cast<RecvStartOp>(op))
        recvs[name.str()][{recv.getPeer(), r}].push_back(
            {op, recv.getProducedType()});
    });
  }
  for (auto &[name, byRank] : programs) {
    if (static_cast<int64_t>(byRank.size()) != ranks)
      return byRank.begin()->second.emitError()
             << "meg-pipeline-split: entry '" << name << "' has programs "
             << "for " << byRank.size() << " of the " << ranks
             << " pipeline ranks";
    std::set<std::pair<int64_t, int64_t>> pairs;
    for (auto &[pair, list] : sends[name])
      pairs.insert(pair);
    for (auto &[pair, list] : recvs[name])
      pairs.insert(pair);
    for (auto [from, to] : pairs) {
      ArrayRef<Transfer> sent = sends[name][{from, to}];
      ArrayRef<Transfer> taken = recvs[name][{from, to}];
      for (size_t i = 0; i < std::max(sent.size(), taken.size()); ++i) {
        if (i >= taken.size())
          return sent[i].op->emitError()
                 << "meg-pipeline-split: rank " << to << " of entry '" << name
                 << "' receives " << taken.size() << " transfers from rank "
                 << from << ", which sends " << sent.size()
                 << "; this send has no receive";
        if (i >= sent.size())
          return taken[i].op->emitError()
                 << "meg-pipeline-split: rank " << from << " of entry '" << name
                 << "' sends " << sent.size() << " transfers to rank " << to
                 << ", which receives " << taken.size()
                 << "; this receive has no send";
        if (sent[i].type != taken[i].type)
          return taken[i].op->emitError()
                 << "meg-pipeline-split: receives " << taken[i].type
                 << " as transfer " << i << " from rank " << from
                 << ", which sends " << sent[i].type;
      }
    }
    if (failed(verifyRendezvous(name, byRank)))
      return failure();
  }
  return success();
}

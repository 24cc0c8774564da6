//===- PipelineSplit.cpp - the meg-pipeline-split pass -------------------===//
//
// Turns each public function of a pipelined module into one program per
// rank of the pipeline group. Every op is placed: on a stage (recorded by
// meg-pipeline-stages and meg-autodiff as `meg.stage`, or the stage of the
// values it reads), on every rank that needs it (it reads no staged value:
// constants, the inputs' micro-batch slices), as a partial sum of several
// stages (an add of values of two stages, summed per rank and all-reduced
// when used), or on every rank after the passes (it reads such a sum). A
// rank's program runs its stages' passes in its schedule's order, each a
// forward (F) or backward (B, and W under zero-bubble schedules) of one
// micro-batch, with the values of other ranks' stages received before the
// pass that reads them and its own sent after the pass that makes them;
// then what follows the passes (the optimizer step), in the function's
// order, on every rank.
//
// Over 600 lines: one Splitter, whose placement of the ops, ordering of
// the passes and transfers, and emission of the rank programs share its
// placement map; the transfers' rendezvous model and the verifier of rank
// programs are PipelineTransfers.cpp.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/PipelinePass.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"
#include "megc/Pipeline/Schedule.h"

#include "GroupRewrites.h"
#include "PipelineTransfers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <set>

namespace mlir::meg {
#define GEN_PASS_DEF_MEGPIPELINESPLIT
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;
namespace pl = megc::pipeline;

namespace {

/// Where an op runs.
struct Placement {
  enum Kind {
    Free,       // reads no staged value: on every rank that needs it
    Owned,      // on `stage`
    Partial,    // a sum of values of several stages
    Replicated, // on every rank after the passes
  } kind = Free;
  int64_t stage = -1;
  int64_t microBatch = 0;
  bool backward = false;
  /// Owned: runs after the passes (it reads a value all-reduced there).
  bool post = false;
};

/// One pass of the schedule: stage, micro-batch and part (0 F, 1 B or BW,
/// 2 W).
using PassKey = std::tuple<int64_t, int64_t, int>;

/// One step of a rank's program.
struct Item {
  enum Kind { Recv, RecvWait, Run, Send, SendWait } kind;
  PassKey pass{};   // Run
  Value value;      // Recv, RecvWait, Send
  int64_t peer = 0; // Recv, RecvWait, Send: the other rank
  size_t send = 0;  // SendWait: the index of its Send in the rank's items
};

/// The transfers a rank issues between two passes, one list per gap (the
/// indices of its Send and Recv items, in order; gaps without any are left
/// out). Each gap is one batch, started together.
std::vector<SmallVector<size_t>> transferGaps(ArrayRef<Item> items) {
  std::vector<SmallVector<size_t>> gaps;
  bool open = false;
  for (auto [i, item] : llvm::enumerate(items)) {
    if (item.kind == Item::Run) {
      open = false;
      continue;
    }
    if (item.kind != Item::Send && item.kind != Item::Recv)
      continue;
    if (!open)
      gaps.emplace_back();
    open = true;
    gaps.back().push_back(i);
  }
  return gaps;
}

struct Splitter {
  ModuleOp module;
  func::FuncOp func;
  PipelineAttr config;
  int64_t ranks, numStages;
  pl::ScheduleKind kind;

  DenseMap<Operation *, Placement> placement;
  /// Owned or partial values all-reduced over the pipeline group after the
  /// passes (a result, a sum of stages, a value another rank needs there).
  llvm::SetVector<Value> replicate;
  /// The ops of each pass, in the function's order.
  std::map<PassKey, SmallVector<Operation *>> passOps;
  DenseMap<Operation *, unsigned> position;

  int64_t rankOf(int64_t stage) const { return stage % ranks; }

  InFlightDiagnostic error(Operation *op) {
    return op->emitError() << "meg-pipeline-split: ";
  }

  /// A parameter that ranks of other stages read too (the step count, a
  /// tied embedding) is stored by every rank, its new value all-reduced to
  /// them; one only its own stage reads stays there.
  void storeWhereRead() {
    Block &block = func.getBody().front();
    std::set<int64_t> everyRank;
    for (int64_t rank = 0; rank < ranks; ++rank)
      everyRank.insert(rank);
    // The ranks that use each op's results.
    DenseMap<Operation *, std::set<int64_t>> usedOn;
    for (Operation &op : llvm::reverse(block)) {
      std::set<int64_t> on;
      for (Operation *user : op.getUsers()) {
        Placement u = placement.lookup(user);
        if (isa<func::ReturnOp>(user) || u.kind == Placement::Replicated ||
            u.kind == Placement::Partial)
          on = everyRank;
        else if (u.kind == Placement::Owned)
          on.insert(rankOf(u.stage));
        else
          on.insert(usedOn[user].begin(), usedOn[user].end());
      }
      usedOn[&op] = std::move(on);
    }
    llvm::StringMap<std::set<int64_t>> readOn;
    for (auto ref : block.getOps<ParamRefOp>())
      readOn[ref.getName()].insert(usedOn[ref].begin(), usedOn[ref].end());
    for (auto store : block.getOps<ParamStoreOp>()) {
      Placement &p = placement[store];
      if (p.kind != Placement::Owned)
        continue;
      const std::set<int64_t> &readers = readOn[store.getName()];
      if (llvm::any_of(readers,
                       [&](int64_t rank) { return rank != rankOf(p.stage); })) {
        replicate.insert(store.getValue());
        if (!p.post)
          llvm::erase(passOps[{p.stage, p.microBatch, p.backward ? 1 : 0}],
                      store.getOperation());
        p = {};
        p.kind = Placement::Replicated;
      }
    }
  }

  Placement placementOf(Value value) const {
    if (Operation *def = value.getDefiningOp())
      return placement.lookup(def);
    return {};
  }

  /// Places every op of the function.
  LogicalResult place() {
    unsigned index = 0;
    for (Operation &op : func.getBody().front()) {
      position[&op] = index++;
      if (isa<func::ReturnOp>(op)) {
        for (Value operand : op.getOperands()) {
          Placement::Kind kind = placementOf(operand).kind;
          if (kind == Placement::Owned || kind == Placement::Partial)
            replicate.insert(operand);
        }
        continue;
      }
      if (op.getNumRegions())
        return error(&op) << "ops with regions are not split into stages";
      Placement p;
      auto stamp = op.getAttrOfType<IntegerAttr>(MegDialect::kStageAttrName);
      if (stamp && stamp.getInt() >= numStages)
        return error(&op) << "runs on stage " << stamp.getInt()
                          << ", but the pipeline has " << numStages;
      bool isSum = isa<AddOp>(op) && !stamp;
      std::set<int64_t> stages, passStages;
      bool reads = false, partial = false, replicated = false;
      for (Value operand : op.getOperands()) {
        Placement q = placementOf(operand);
        switch (q.kind) {
        case Placement::Free:
          reads = true;
          break;
        case Placement::Owned:
          stages.insert(q.stage);
          if (!q.post)
            passStages.insert(q.stage);
          p.microBatch = std::max(p.microBatch, q.microBatch);
          p.backward |= q.backward;
          p.post |= q.post;
          break;
        case Placement::Partial:
          partial = true;
          break;
        case Placement::Replicated:
          replicated = true;
          break;
        }
      }
      // A sum of values of several stages stays a per-rank partial sum
      // while only sums read it; anything else reads the all-reduced total.
      bool sumOfStages =
          isSum && !replicated && !reads && (partial || stages.size() > 1);
      if (partial && !sumOfStages) {
        for (Value operand : op.getOperands())
          if (placementOf(operand).kind == Placement::Partial)
            replicate.insert(operand);
        replicated = true;
      }
      if (auto mb =
              op.getAttrOfType<IntegerAttr>(MegDialect::kMicroBatchAttrName))
        p.microBatch = mb.getInt();
      p.backward |= op.hasAttr(MegDialect::kBackwardAttrName);
      if (sumOfStages) {
        p.kind = Placement::Partial;
      } else if (stamp) {
        p.kind = Placement::Owned;
        p.stage = stamp.getInt();
      } else if (stages.empty()) {
        p.kind = replicated ? Placement::Replicated : Placement::Free;
        // An effect nothing reads (a state update) happens on every rank.
        if (p.kind == Placement::Free && !isMemoryEffectFree(&op) &&
            op.use_empty())
          p.kind = Placement::Replicated;
      } else if (stages.size() == 1) {
        p.kind = Placement::Owned;
        p.stage = *stages.begin();
      } else {
        // Values of several stages (an update reading its gradient and the
        // step's count of non-finite values): the op runs after the passes
        // on the stage of its largest input, the others all-reduced to
        // every rank there.
        int64_t largest = -1;
        for (Value operand : op.getOperands()) {
          Placement q = placementOf(operand);
          auto type = dyn_cast<RankedTensorType>(operand.getType());
          int64_t size =
              type && type.hasStaticShape() ? type.getNumElements() : 0;
          if (q.kind == Placement::Owned && size > largest) {
            largest = size;
            p.stage = q.stage;
          }
        }
        p.kind = Placement::Owned;
        p.post = true;
      }
      if (p.kind == Placement::Owned) {
        p.post |= replicated;
        // Values of another rank's stage: received before the pass, or
        // all-reduced to every rank after the passes.
        if (p.post)
          for (Value operand : op.getOperands()) {
            Placement q = placementOf(operand);
            if (q.kind == Placement::Owned &&
                rankOf(q.stage) != rankOf(p.stage))
              replicate.insert(operand);
          }
        if (!p.post)
          passOps[{p.stage, p.microBatch, p.backward ? 1 : 0}].push_back(&op);
      }
      placement[&op] = p;
    }
    storeWhereRead();
    for (Value value : replicate)
      if (!isa<FloatType>(
              cast<RankedTensorType>(value.getType()).getElementType()))
        return error(value.getDefiningOp())
               << "its " << value.getType()
               << " result is needed on every rank, but only floating-point "
                  "values are all-reduced";
    return success();
  }

  /// Each rank's passes in its order: the schedule's for a function over
  /// `microBatches`, else each stage's forward, then its backward.
  FailureOr<std::vector<std::vector<PassKey>>> order(int64_t microBatches,
                                                     bool stepSchedule) {
    std::vector<std::vector<PassKey>> passes(ranks);
    int64_t chunks = config.getVirtualStages();
    if (!stepSchedule) {
      for (int64_t rank = 0; rank < ranks; ++rank) {
        for (int64_t c = 0; c < chunks; ++c)
          passes[rank].push_back({rank + c * ranks, 0, 0});
        for (int64_t c = chunks - 1; c >= 0; --c)
          passes[rank].push_back({rank + c * ranks, 0, 1});
      }
      return passes;
    }
    llvm::Expected<pl::Schedule> schedule = pl::buildSchedule(
        kind, static_cast<int32_t>(ranks), static_cast<int32_t>(chunks),
        static_cast<int32_t>(microBatches));
    if (!schedule) {
      error(func) << "the " << pl::scheduleName(kind) << " schedule over "
                  << microBatches
                  << " micro-batches: " << llvm::toString(schedule.takeError());
      return failure();
    }
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (const pl::Action &action : schedule->actions[rank]) {
        int part;
        switch (action.pass) {
        case pl::Pass::Forward:
          part = 0;
          break;
        case pl::Pass::Backward:
        case pl::Pass::BackwardInput:
          part = 1;
          break;
        case pl::Pass::BackwardWeight:
          part = 2;
          break;
        default:
          continue;
        }
        passes[rank].push_back({action.stage, action.microBatch, part});
      }
    return passes;
  }

  /// Under zero-bubble schedules, a backward pass's ops that the values it
  /// sends to other ranks do not need move to its W part.
  void splitWeightGradients(const DenseMap<Value, std::set<int64_t>> &sentTo) {
    std::map<PassKey, SmallVector<Operation *>> weights;
    for (auto &[key, ops] : passOps) {
      if (std::get<2>(key) != 1)
        continue;
      DenseSet<Operation *> inPass(ops.begin(), ops.end()), needed;
      SmallVector<Operation *> worklist;
      for (Operation *op : ops)
        for (Value result : op->getResults())
          if (sentTo.count(result))
            worklist.push_back(op);
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        if (!needed.insert(op).second)
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && inPass.count(def))
            worklist.push_back(def);
      }
      SmallVector<Operation *> input, weight;
      for (Operation *op : ops)
        (needed.count(op) ? input : weight).push_back(op);
      ops = input;
      weights[{std::get<0>(key), std::get<1>(key), 2}] = weight;
    }
    for (auto &[key, ops] : weights)
      passOps[key] = ops;
  }

  LogicalResult run(int64_t microBatches, bool stepSchedule) {
    if (failed(place()))
      return failure();
    for (auto &[key, ops] : passOps) {
      auto [stage, microBatch, part] = key;
      if (microBatch >= microBatches)
        return error(ops.front())
               << "belongs to micro-batch " << microBatch << ", but "
               << func.getName() << " runs " << microBatches;
    }
    FailureOr<std::vector<std::vector<PassKey>>> passes =
        order(microBatches, stepSchedule);
    if (failed(passes))
      return failure();

    // The values each pass reads from other ranks' stages, and the ranks
    // each value goes to.
    DenseMap<Value, std::set<int64_t>> sentTo;
    for (auto &[key, ops] : passOps)
      for (Operation *op : ops)
        for (Value operand : op->getOperands()) {
          Placement q = placementOf(operand);
          if (q.kind == Placement::Owned && !q.post &&
              rankOf(q.stage) != rankOf(std::get<0>(key)))
            sentTo[operand].insert(rankOf(std::get<0>(key)));
        }
    bool zeroBubble = stepSchedule && kind == pl::ScheduleKind::ZeroBubbleH1;
    if (zeroBubble)
      splitWeightGradients(sentTo);
    else
      for (auto &[key, ops] : passOps)
        if (std::get<2>(key) == 1)
          passOps[{std::get<0>(key), std::get<1>(key), 2}];

    // Every pass of the function must be in the schedule once.
    std::map<PassKey, int64_t> scheduled;
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (const PassKey &key : (*passes)[rank])
        scheduled[key] = rank;
    for (auto &[key, ops] : passOps)
      if (!ops.empty() && !scheduled.count(key))
        return error(ops.front())
               << "its pass (stage " << std::get<0>(key) << ", micro-batch "
               << std::get<1>(key) << ") is not in the schedule";

    // Each rank's items: receives before a pass, sends after it.
    std::vector<std::vector<Item>> items(ranks);
    std::vector<DenseSet<Value>> received(ranks);
    // A pass's index in its rank's order, to order transfers.
    std::map<PassKey, size_t> passIndex;
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (auto [i, key] : llvm::enumerate((*passes)[rank]))
        passIndex[key] = i;
    auto producer = [&](Value value) {
      Placement q = placementOf(value);
      int part = q.backward ? 1 : 0;
      PassKey key{q.stage, q.microBatch, part};
      if (zeroBubble && part == 1 &&
          !llvm::is_contained(passOps[key], value.getDefiningOp()))
        key = {q.stage, q.microBatch, 2};
      return key;
    };
    for (int64_t rank = 0; rank < ranks; ++rank) {
      for (const PassKey &key : (*passes)[rank]) {
        SmallVector<Value> incoming;
        for (Operation *op : passOps[key])
          for (Value operand : op->getOperands())
            if (sentTo.count(operand) &&
                rankOf(placementOf(operand).stage) != rank &&
                received[rank].insert(operand).second)
              incoming.push_back(operand);
        // In the order the senders send them.
        llvm::stable_sort(incoming, [&](Value a, Value b) {
          return std::make_pair(passIndex[producer(a)],
                                position[a.getDefiningOp()]) <
                 std::make_pair(passIndex[producer(b)],
                                position[b.getDefiningOp()]);
        });
        for (Value value : incoming) {
          int64_t from = rankOf(placementOf(value).stage);
          items[rank].push_back({Item::Recv, {}, value, from});
          items[rank].push_back({Item::RecvWait, {}, value, from});
        }
        items[rank].push_back({Item::Run, key});
        for (Operation *op : passOps[key])
          for (Value result : op->getResults())
            if (auto it = sentTo.find(result); it != sentTo.end())
              for (int64_t to : it->second)
                items[rank].push_back({Item::Send, {}, result, to});
      }
    }

    // Transfers between two ranks arrive in the order they were sent.
    std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> sends, recvs;
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (const Item &item : items[rank]) {
        if (item.kind == Item::Send)
          sends[{rank, item.peer}].push_back(item.value);
        if (item.kind == Item::Recv)
          recvs[{item.peer, rank}].push_back(item.value);
      }
    for (auto &[pair, values] : sends)
      if (recvs[pair] != values)
        return error(func) << "the schedule has rank " << pair.second
                           << " receive what rank " << pair.first
                           << " sends in another order than sent";

    if (failed(postReceivesEarly(items)))
      return failure();

    // A send is waited for right after a receive from its peer that the
    // peer sent after it took the sent value; else after the passes.
    std::vector<std::vector<Item>> withWaits(ranks);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      // Where the peer took each value (index in its items).
      auto indexIn = [&](int64_t peer, Item::Kind kind, Value value,
                         int64_t other) -> size_t {
        for (auto [i, item] : llvm::enumerate(items[peer]))
          if (item.kind == kind && item.value == value && item.peer == other)
            return i;
        return items[peer].size();
      };
      std::map<size_t, SmallVector<size_t>> waitsAfter;
      SmallVector<size_t> atEnd;
      for (auto [i, item] : llvm::enumerate(items[rank])) {
        if (item.kind != Item::Send)
          continue;
        size_t taken = indexIn(item.peer, Item::RecvWait, item.value, rank);
        std::optional<size_t> after;
        for (size_t j = i + 1; j < items[rank].size() && !after; ++j) {
          const Item &later = items[rank][j];
          if (later.kind == Item::RecvWait && later.peer == item.peer &&
              indexIn(item.peer, Item::Send, later.value, rank) > taken)
            after = j;
        }
        if (after)
          waitsAfter[*after].push_back(i);
        else
          atEnd.push_back(i);
      }
      for (auto [i, item] : llvm::enumerate(items[rank])) {
        withWaits[rank].push_back(item);
        for (size_t send : waitsAfter[i])
          withWaits[rank].push_back({Item::SendWait, {}, {}, 0, send});
      }
      for (size_t send : atEnd)
        withWaits[rank].push_back({Item::SendWait, {}, {}, 0, send});
    }

    for (int64_t rank = 0; rank < ranks; ++rank)
      if (failed(emit(rank, items[rank], withWaits[rank])))
        return failure();
    return success();
  }

  /// The transfers between two passes form a batch (started together).
  /// Where two ranks would wait on each other with a send held until its
  /// receive is posted (findBlockedSide), the receiving rank posts that
  /// receive (and its earlier ones from the same sender) with the batch it
  /// has reached; its wait stays before the pass that reads the value.
  /// A receive posted early delays nothing, and the pair then completes
  /// together, until every batch does.
  LogicalResult postReceivesEarly(std::vector<std::vector<Item>> &items) {
    size_t limit = 1;
    for (const std::vector<Item> &list : items)
      limit += list.size();
    for (size_t round = 0; round < limit; ++round) {
      std::vector<std::vector<SmallVector<BatchSide>>> batches(ranks);
      std::vector<std::vector<SmallVector<size_t>>> at(ranks);
      for (int64_t rank = 0; rank < ranks; ++rank) {
        at[rank] = transferGaps(items[rank]);
        for (const SmallVector<size_t> &gap : at[rank]) {
          batches[rank].emplace_back();
          for (size_t i : gap)
            batches[rank].back().push_back(
                {items[rank][i].peer, items[rank][i].kind == Item::Send});
        }
      }
      std::optional<BlockedSide> blocked = findBlockedSide(batches);
      if (!blocked)
        return success();
      int64_t from = blocked->rank;
      const BatchSide &side = batches[from][blocked->batch][blocked->side];
      size_t index = at[from][blocked->batch][blocked->side];
      if (!side.send || blocked->peerBatch >= at[side.peer].size())
        return error(func)
               << "the schedule's transfers wait on each other where a send "
                  "may wait until its receive is posted (pipeline rank "
               << from << ", transfer " << index << ")";
      // The send's order among this rank's sends to the peer, and the
      // peer's receives from this rank up to its match.
      size_t order = 0;
      for (size_t i = 0; i < index; ++i)
        order += items[from][i].kind == Item::Send &&
                 items[from][i].peer == side.peer;
      std::vector<Item> &list = items[side.peer];
      size_t insertAt = at[side.peer][blocked->peerBatch].back() + 1;
      std::vector<Item> early, rest;
      size_t seen = 0;
      for (auto [i, item] : llvm::enumerate(list)) {
        bool fromSender = item.kind == Item::Recv && item.peer == from;
        if (fromSender && seen++ <= order && i >= insertAt)
          early.push_back(item);
        else if (i >= insertAt)
          rest.push_back(item);
      }
      std::vector<Item> rebuilt(list.begin(), list.begin() + insertAt);
      rebuilt.insert(rebuilt.end(), early.begin(), early.end());
      rebuilt.insert(rebuilt.end(), rest.begin(), rest.end());
      list = std::move(rebuilt);
    }
    return error(func) << "found no order of the schedule's transfers that "
                          "completes where a send may wait for its receive";
  }

  /// The zero of a value's type, a rank's share of a sum it takes no part
  /// in.
  Value zeros(OpBuilder &builder, Value like) {
    auto type = cast<RankedTensorType>(like.getType());
    return arith::ConstantOp::create(
        builder, like.getLoc(), type,
        DenseElementsAttr::get(type,
                               builder.getZeroAttr(type.getElementType())));
  }

  LogicalResult emit(int64_t rank, ArrayRef<Item> sendsOf,
                     ArrayRef<Item> program) {
    OpBuilder builder(func);
    builder.setInsertionPoint(func);
    auto rankFunc = cast<func::FuncOp>(builder.cloneWithoutRegions(*func));
    rankFunc.setName((func.getName() + "_pp" + Twine(rank)).str());
    rankFunc->setAttr(MegDialect::kEntryNameAttrName, func.getNameAttr());
    rankFunc->setAttr(MegDialect::kPipelineRankAttrName,
                      builder.getI64IntegerAttr(rank));
    Block *body = rankFunc.addEntryBlock();
    IRMapping mapping;
    for (auto [from, to] : llvm::zip(func.getArguments(), body->getArguments()))
      mapping.map(from, to);
    // Values every rank computes where it first needs them go at the top.
    OpBuilder top = OpBuilder::atBlockBegin(body);
    OpBuilder at = OpBuilder::atBlockEnd(body);
    auto mesh = config.getMesh();
    auto axes = config.getAxes();

    std::function<FailureOr<Value>(Value, Operation *)> resolve =
        [&](Value value, Operation *user) -> FailureOr<Value> {
      if (Value mapped = mapping.lookupOrNull(value))
        return mapped;
      Operation *def = value.getDefiningOp();
      if (!def || placement.lookup(def).kind != Placement::Free) {
        error(user) << "on pipeline rank " << rank
                    << ", it reads a value its rank has not computed yet "
                       "(the schedule runs a pass before its input)";
        return failure();
      }
      for (Value operand : def->getOperands())
        if (failed(resolve(operand, def)))
          return failure();
      Operation *copy = top.clone(*def, mapping);
      top.setInsertionPointAfter(copy);
      return copy->getResult(cast<OpResult>(value).getResultNumber());
    };
    // Clones `op` at the end, recording `pass` on the copy where given.
    auto cloneAt = [&](Operation *op, StringAttr pass = {}) -> LogicalResult {
      for (Value operand : op->getOperands())
        if (failed(resolve(operand, op)))
          return failure();
      Operation *copy = at.clone(*op, mapping);
      if (pass)
        copy->setAttr(MegDialect::kPipelinePassAttrName, pass);
      return success();
    };

    // The transfers between two passes form a batch, started together
    // (meg.send_start's `batch`); the waits among them follow its last.
    // A gap of one transfer needs no batch.
    std::vector<int64_t> batchOf(program.size(), -1);
    int64_t batches = 0;
    for (const SmallVector<size_t> &gap : transferGaps(program))
      if (gap.size() > 1) {
        for (size_t i : gap)
          batchOf[i] = batches;
        ++batches;
      }
    auto batchAttr = [&](size_t i) {
      return batchOf[i] < 0 ? IntegerAttr() : at.getI64IntegerAttr(batchOf[i]);
    };
    std::vector<Value> futures(sendsOf.size());
    SmallVector<std::pair<Value, Value>> recvWaits;
    DenseMap<Value, Value> receiving;
    SmallVector<size_t> sendWaits;
    auto flushWaits = [&] {
      for (auto [value, future] : recvWaits)
        mapping.map(value,
                    WaitOp::create(at, value.getLoc(), future).getResult());
      for (size_t send : sendWaits)
        WaitOp::create(at, func.getLoc(), futures[send]);
      recvWaits.clear();
      sendWaits.clear();
    };
    for (auto [index, item] : llvm::enumerate(program)) {
      switch (item.kind) {
      case Item::Recv: {
        auto type = cast<RankedTensorType>(item.value.getType());
        receiving[item.value] = RecvStartOp::create(
            at, item.value.getLoc(), FutureType::get(at.getContext(), type),
            mesh, axes, at.getI64IntegerAttr(item.peer), batchAttr(index));
        break;
      }
      case Item::RecvWait:
        recvWaits.push_back({item.value, receiving.lookup(item.value)});
        break;
      case Item::Run: {
        flushWaits();
        // Each op records its pass (meg-outline-cuda-graphs names a
        // layer's graph regions by it).
        auto [stage, microBatch, part] = item.pass;
        StringAttr pass =
            pipelinePassAttr(at, {part == 0   ? PipelinePass::Forward
                                  : part == 1 ? PipelinePass::Backward
                                              : PipelinePass::Weight,
                                  microBatch});
        for (Operation *op : passOps[item.pass])
          if (failed(cloneAt(op, pass)))
            return failure();
        break;
      }
      case Item::Send: {
        Value future = SendStartOp::create(
            at, item.value.getLoc(),
            FutureType::get(at.getContext(),
                            cast<RankedTensorType>(item.value.getType())),
            mapping.lookup(item.value), mesh, axes,
            at.getI64IntegerAttr(item.peer), batchAttr(index));
        // Find this send's index among the rank's items (its identity).
        for (auto [i, send] : llvm::enumerate(sendsOf))
          if (send.kind == Item::Send && send.value == item.value &&
              send.peer == item.peer)
            futures[i] = future;
        break;
      }
      case Item::SendWait:
        sendWaits.push_back(item.send);
        break;
      }
    }
    flushWaits();

    // After the passes: the rest in the function's order, on every rank.
    DenseMap<Value, Value> localPartial;
    for (Operation &op : func.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        SmallVector<Value> results;
        for (Value operand : ret.getOperands()) {
          FailureOr<Value> mapped = resolve(operand, &op);
          if (failed(mapped))
            return failure();
          results.push_back(*mapped);
        }
        func::ReturnOp::create(at, ret.getLoc(), results);
        break;
      }
      Placement p = placement.lookup(&op);
      if (p.kind == Placement::Partial) {
        // This rank's share: the sum of its stages' terms.
        Value sum;
        for (Value operand : op.getOperands()) {
          Placement q = placementOf(operand);
          Value term = q.kind == Placement::Partial
                           ? localPartial.lookup(operand)
                       : rankOf(q.stage) == rank ? mapping.lookupOrNull(operand)
                                                 : Value();
          if (!term)
            continue;
          sum = sum ? AddOp::create(at, op.getLoc(), sum, term).getResult()
                    : term;
        }
        if (sum)
          localPartial[op.getResult(0)] = sum;
      } else if (p.kind == Placement::Replicated ||
                 (p.kind == Placement::Owned && p.post &&
                  rankOf(p.stage) == rank)) {
        if (failed(cloneAt(&op)))
          return failure();
      }
      for (Value result : op.getResults()) {
        if (!replicate.contains(result))
          continue;
        Value share = p.kind == Placement::Partial ? localPartial.lookup(result)
                      : rankOf(p.stage) == rank ? mapping.lookupOrNull(result)
                                                : Value();
        if (!share)
          share = zeros(at, result);
        Value total = AllReduceOp::create(
            at, op.getLoc(), result.getType(), share, mesh, axes,
            CollectiveReduceAttr::get(at.getContext(), CollectiveReduce::sum));
        mapping.map(result, total);
      }
    }
    return success();
  }
};

struct MegPipelineSplitPass
    : public mlir::meg::impl::MegPipelineSplitBase<MegPipelineSplitPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config =
        module->getAttrOfType<PipelineAttr>(MegDialect::kPipelineAttrName);
    if (!config)
      return;
    auto mesh = module.lookupSymbol<MeshOp>(config.getMesh().getAttr());
    if (!mesh) {
      module.emitError() << "meg-pipeline-split: mesh "
                         << config.getMesh().getValue() << " is not a meg.mesh";
      return signalPassFailure();
    }
    int64_t ranks = groupRanks(mesh, config.getAxes());
    std::optional<pl::ScheduleKind> kind = pl::parseScheduleKind(
        config.getSchedule()            ? config.getSchedule().getValue()
        : config.getVirtualStages() > 1 ? "interleaved"
                                        : "1f1b");
    if (!kind) {
      module.emitError() << "meg-pipeline-split: unknown schedule";
      return signalPassFailure();
    }
    int64_t microBatches = 1;
    if (auto attr = module->getAttrOfType<IntegerAttr>(
            MegDialect::kMicroBatchesAttrName))
      microBatches = attr.getInt();
    // The group's transfers and sums run over its registered submesh.
    registerSubmesh(module, mesh, config.getMesh(), config.getAxes());

    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal() &&
          !func->hasAttr(MegDialect::kPipelineRankAttrName))
        entries.push_back(func);
    for (func::FuncOp func : entries) {
      // The step (its ops record their micro-batch) follows the schedule.
      bool step = false;
      func.walk([&](Operation *op) {
        step |= op->hasAttr(MegDialect::kMicroBatchAttrName);
      });
      step |= func.getName() == "train_step";
      Splitter splitter{
          module, func, config, ranks, ranks * config.getVirtualStages(),
          *kind,  {},   {},     {},    {}};
      if (failed(splitter.run(step ? microBatches : 1, step)))
        return signalPassFailure();
      func.erase();
    }
    if (failed(verifyPipelineTransfers(module, ranks)))
      return signalPassFailure();
    // Each parameter one rank updates records that rank; checkpoints take
    // its value from there.
    std::map<std::string, std::set<int64_t>> writers;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto rank = func->getAttrOfType<IntegerAttr>(
              MegDialect::kPipelineRankAttrName))
        func.walk([&](ParamStoreOp store) {
          writers[store.getName().str()].insert(rank.getInt());
        });
    OpBuilder builder(module.getContext());
    for (ParamOp param : module.getOps<ParamOp>()) {
      auto it = writers.find(param.getSymName().str());
      if (it != writers.end() && it->second.size() == 1 && ranks > 1)
        param->setAttr(MegDialect::kPipelineOwnerAttrName,
                       builder.getI64IntegerAttr(*it->second.begin()));
    }
    // The records the split consumed.
    module.walk([](Operation *op) {
      op->removeAttr(MegDialect::kStageAttrName);
      op->removeAttr(MegDialect::kBackwardAttrName);
      op->removeAttr(MegDialect::kMicroBatchAttrName);
    });
  }
};

} // namespace

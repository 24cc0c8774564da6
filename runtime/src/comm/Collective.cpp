// What every backend checks about a collective before starting it.
#include "comm/Collective.h"

#include "Fail.h"

namespace megrt::comm {
namespace {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  }
  return "<invalid reduce op>";
}

bool isReduction(CollectiveKind kind) { return collectiveInfo(kind).reduces; }

} // namespace

const char *collectiveName(CollectiveKind kind) {
  if (static_cast<size_t>(kind) >= kNumCollectives)
    return "<invalid collective>";
  return collectiveInfo(kind).name;
}

std::string describeCollective(CollectiveKind kind, DType dtype, ReduceOp op,
                               size_t count, int groupSize) {
  std::string what = collectiveName(kind);
  what += isReduction(kind) ? concat(" (", reduceOpName(op), ", ")
                            : std::string(" (");
  return concat(what, dtypeName(dtype), ", ", count,
                count == 1 ? " element" : " elements", ") on a group of ",
                groupSize, groupSize == 1 ? " rank" : " ranks");
}

std::string describeExchange(DType dtype, size_t count, int sendTo,
                             int recvFrom, int groupSize) {
  std::string sides;
  if (sendTo >= 0)
    sides = concat("send to rank ", sendTo);
  if (recvFrom >= 0)
    sides += concat(sides.empty() ? "" : ", ", "receive from rank ", recvFrom);
  return concat("exchange (", dtypeName(dtype), ", ", count,
                count == 1 ? " element" : " elements", ": ", sides,
                ") on a group of ", groupSize,
                groupSize == 1 ? " rank" : " ranks");
}

void checkExchange(DType dtype, size_t count, int sendTo, int recvFrom,
                   int groupSize) {
  if (static_cast<uint8_t>(dtype) > static_cast<uint8_t>(DType::I64))
    fail("exchange: invalid dtype value ", static_cast<int>(dtype));
  if (sendTo < 0 && recvFrom < 0)
    fail("exchange of ", count,
         " elements with neither a rank to send to "
         "nor one to receive from");
  for (int peer : {sendTo, recvFrom})
    if (peer < -1 || peer >= groupSize)
      fail(describeExchange(dtype, count, sendTo, recvFrom, groupSize),
           ": rank ", peer, " is not in the group (ranks 0 to ", groupSize - 1,
           ", or -1 for no peer)");
}

std::string timeoutMessage(const std::string &what, double timeoutSeconds) {
  return concat(what, " did not complete within ", timeoutSeconds,
                " s; a peer rank may have died or stalled (MEGRT_COMM_TIMEOUT "
                "sets the limit)");
}

void checkCollective(CollectiveKind kind, DType dtype, ReduceOp op,
                     size_t count, int groupSize) {
  if (static_cast<size_t>(kind) >= kNumCollectives ||
      !collectiveInfo(kind).communicates)
    fail("invalid collective kind ", static_cast<int>(kind),
         " (none of megrt/Collectives.def that communicates)");
  if (static_cast<uint8_t>(dtype) > static_cast<uint8_t>(DType::I64))
    fail(collectiveName(kind), ": invalid dtype value ",
         static_cast<int>(dtype));
  if (!isReduction(kind))
    return;
  if (static_cast<uint8_t>(op) > static_cast<uint8_t>(ReduceOp::Max))
    fail(collectiveName(kind), ": invalid reduce op ", static_cast<int>(op));
  if (op == ReduceOp::Avg && !isFloatingPoint(dtype))
    fail(describeCollective(kind, dtype, op, count, groupSize),
         ": an average needs a floating-point dtype (f32, bf16 or f16); "
         "sum the integers instead");
}

size_t sourceCount(CollectiveKind kind, size_t count, int groupSize) {
  return collectiveInfo(kind).sourceElements(count,
                                             static_cast<size_t>(groupSize));
}

size_t destinationCount(CollectiveKind kind, size_t count, int groupSize) {
  return collectiveInfo(kind).destinationElements(
      count, static_cast<size_t>(groupSize));
}

void failUnknownCollectiveHandle(uint64_t handle, const std::string &group) {
  fail(group, ": wait for collective handle ", handle,
       ", which is not pending (never started, or already waited for)");
}

} // namespace megrt::comm

namespace megrt::comm {

std::vector<uint64_t>
Group::startTransfers(const std::vector<Transfer> &transfers, void *stream) {
  std::vector<uint64_t> handles;
  handles.reserve(transfers.size());
  for (const Transfer &t : transfers)
    handles.push_back(t.send ? startExchange(t.send, t.peer, nullptr, -1,
                                             t.count, t.dtype, stream)
                             : startExchange(nullptr, -1, t.recv, t.peer,
                                             t.count, t.dtype, stream));
  return handles;
}

} // namespace megrt::comm

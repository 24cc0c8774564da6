// The stand-in NCCL: the calls megrt makes (runtime/src/comm/nccl/
// Nccl.def), with nccl.h's prototypes, over MPI between the processes
// mpirun started (a communicator of one rank needs no MPI). Collectives run
// at once, or when the graph a stream captured them into is launched;
// reductions gather every rank's values and add them in rank order in
// double, rounded once, so that every rank gets the same bits. Sends and
// receives inside ncclGroupStart/End are posted together at the end.
#include "Standin.h"

#include "megrt/HalfFloat.h"

#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

struct ncclComm {
  /// MPI_COMM_NULL for a communicator of one rank.
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::string lastError;
};

namespace megemu::standin {
namespace {

struct PointToPoint {
  bool send;
  void *buffer;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};

int groupDepth = 0;
std::vector<PointToPoint> grouped;

size_t bytesOf(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

double load(ncclDataType_t type, const uint8_t *data, size_t i) {
  uint16_t half;
  switch (type) {
  case ncclFloat32: {
    float v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  case ncclBfloat16:
    std::memcpy(&half, data + 2 * i, 2);
    return megrt::bf16ToFloat(half);
  case ncclFloat16:
    std::memcpy(&half, data + 2 * i, 2);
    return megrt::f16ToFloat(half);
  case ncclInt32: {
    int32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  case ncclInt64: {
    int64_t v;
    std::memcpy(&v, data + 8 * i, 8);
    return static_cast<double>(v);
  }
  default: {
    double v;
    std::memcpy(&v, data + 8 * i, 8);
    return v;
  }
  }
}

/// A reduced value in the collective's type: floats rounded to f32 once and
/// then (16-bit types) to nearest even.
void store(ncclDataType_t type, uint8_t *data, size_t i, double value) {
  uint16_t half;
  switch (type) {
  case ncclFloat32: {
    float v = static_cast<float>(value);
    std::memcpy(data + 4 * i, &v, 4);
    return;
  }
  case ncclBfloat16:
    half = megrt::floatToBf16(static_cast<float>(value));
    std::memcpy(data + 2 * i, &half, 2);
    return;
  case ncclFloat16:
    half = megrt::floatToF16(static_cast<float>(value));
    std::memcpy(data + 2 * i, &half, 2);
    return;
  case ncclInt32: {
    auto v = static_cast<int32_t>(value);
    std::memcpy(data + 4 * i, &v, 4);
    return;
  }
  case ncclInt64: {
    auto v = static_cast<int64_t>(value);
    std::memcpy(data + 8 * i, &v, 8);
    return;
  }
  default:
    std::memcpy(data + 8 * i, &value, 8);
  }
}

/// Every rank's `bytes` from `send`, in rank order.
std::vector<uint8_t> gather(ncclComm_t comm, const void *send, size_t bytes) {
  std::vector<uint8_t> all(bytes * comm->size);
  if (comm->size == 1) {
    std::memcpy(all.data(), send, bytes);
    return all;
  }
  std::vector<uint8_t> own(static_cast<const uint8_t *>(send),
                           static_cast<const uint8_t *>(send) + bytes);
  MPI_Allgather(own.data(), static_cast<int>(bytes), MPI_BYTE, all.data(),
                static_cast<int>(bytes), MPI_BYTE, comm->comm);
  return all;
}

/// recv[i] = op over ranks (in rank order) of the gathered chunk `chunk`'s
/// element i.
void reduce(const std::vector<uint8_t> &all, size_t rankBytes, size_t chunk,
            size_t count, ncclDataType_t type, ncclRedOp_t op, int ranks,
            void *recv) {
  auto *out = static_cast<uint8_t *>(recv);
  size_t element = bytesOf(type);
  for (size_t i = 0; i < count; ++i) {
    double total = 0;
    for (int r = 0; r < ranks; ++r) {
      double v = load(type, all.data() + r * rankBytes + chunk * count * element,
                      i);
      total = r == 0 ? v : op == ncclMax ? std::max(total, v) : total + v;
    }
    if (op == ncclAvg)
      total /= ranks;
    store(type, out, i, total);
  }
}

ncclResult_t checkOp(ncclRedOp_t op, ncclDataType_t type) {
  if (op != ncclSum && op != ncclAvg && op != ncclMax)
    return ncclInvalidArgument;
  if (type != ncclFloat32 && type != ncclBfloat16 && type != ncclFloat16 &&
      type != ncclInt32 && type != ncclInt64)
    return ncclInvalidArgument;
  return ncclSuccess;
}

ncclResult_t toNccl(CUresult result) {
  return result == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

void runPointToPoint(const std::vector<PointToPoint> &ops) {
  std::vector<MPI_Request> requests;
  for (const PointToPoint &op : ops) {
    if (op.comm->size == 1)
      continue;
    MPI_Request request;
    if (op.send)
      MPI_Isend(op.buffer, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 7,
                op.comm->comm, &request);
    else
      MPI_Irecv(op.buffer, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 7,
                op.comm->comm, &request);
    requests.push_back(request);
  }
  // A rank sending to itself: the copy.
  for (const PointToPoint &send : ops)
    if (send.send && send.comm->size == 1)
      for (const PointToPoint &receive : ops)
        if (!receive.send && receive.comm == send.comm)
          std::memcpy(receive.buffer, send.buffer, send.bytes);
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
              MPI_STATUSES_IGNORE);
}

bool mpiRunning() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

} // namespace
} // namespace megemu::standin

using namespace megemu::standin;

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (the stand-in's message is in the log)";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  default:
    return "internal error";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  return comm ? comm->lastError.c_str() : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::random_device random;
  for (char &byte : id->internal)
    byte = static_cast<char>(random());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *) {
  auto made = std::make_unique<ncclComm>();
  made->rank = rank;
  made->size = nranks;
  if (nranks > 1) {
    if (!mpiRunning()) {
      State::get().log("NCCL of " + std::to_string(nranks) +
                       " ranks without MPI");
      return ncclInvalidUsage;
    }
    // Every rank of the world makes its communicators in the same order:
    // the id names the group.
    uint32_t color = 2166136261u;
    for (char byte : id.internal)
      color = (color ^ static_cast<uint8_t>(byte)) * 16777619u;
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & 0x7fffffff), rank,
                   &made->comm);
    int size = 0;
    MPI_Comm_size(made->comm, &size);
    if (size != nranks)
      return ncclInvalidUsage;
  }
  State::get().log("nccl init " + std::to_string(rank) + "/" +
                   std::to_string(nranks));
  *comm = made.release();
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t parent, int color, int key,
                           ncclComm_t *child, ncclConfig_t *) {
  *child = nullptr;
  auto made = std::make_unique<ncclComm>();
  if (parent->size == 1) {
    if (color == NCCL_SPLIT_NOCOLOR)
      return ncclSuccess;
  } else {
    MPI_Comm_split(parent->comm,
                   color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key,
                   &made->comm);
    if (made->comm == MPI_COMM_NULL)
      return ncclSuccess;
    MPI_Comm_rank(made->comm, &made->rank);
    MPI_Comm_size(made->comm, &made->size);
    if (made->size == 1) {
      MPI_Comm_free(&made->comm);
      made->comm = MPI_COMM_NULL;
    }
  }
  State::get().log("nccl split " + std::to_string(made->rank) + "/" +
                   std::to_string(made->size));
  *child = made.release();
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm && comm->comm != MPI_COMM_NULL && mpiRunning())
    MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  State &state = State::get();
  size_t bytes = count * bytesOf(type);
  if (!state.holds(reinterpret_cast<uint64_t>(send), bytes) ||
      !state.holds(reinterpret_cast<uint64_t>(recv), bytes * comm->size))
    return ncclInvalidArgument;
  return toNccl(state.enqueue(
      reinterpret_cast<CUstream>(stream), "ncclAllGather", [=] {
        std::vector<uint8_t> all = gather(comm, send, bytes);
        std::memcpy(recv, all.data(), all.size());
        return CUDA_SUCCESS;
      }));
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  State &state = State::get();
  size_t bytes = count * bytesOf(type);
  if (checkOp(op, type) != ncclSuccess ||
      !state.holds(reinterpret_cast<uint64_t>(send), bytes * comm->size) ||
      !state.holds(reinterpret_cast<uint64_t>(recv), bytes))
    return ncclInvalidArgument;
  return toNccl(state.enqueue(
      reinterpret_cast<CUstream>(stream), "ncclReduceScatter", [=] {
        std::vector<uint8_t> all = gather(comm, send, bytes * comm->size);
        reduce(all, bytes * comm->size, comm->rank, count, type, op,
               comm->size, recv);
        return CUDA_SUCCESS;
      }));
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  State &state = State::get();
  size_t bytes = count * bytesOf(type);
  if (checkOp(op, type) != ncclSuccess ||
      !state.holds(reinterpret_cast<uint64_t>(send), bytes) ||
      !state.holds(reinterpret_cast<uint64_t>(recv), bytes))
    return ncclInvalidArgument;
  return toNccl(state.enqueue(
      reinterpret_cast<CUstream>(stream), "ncclAllReduce", [=] {
        std::vector<uint8_t> all = gather(comm, send, bytes);
        reduce(all, bytes, 0, count, type, op, comm->size, recv);
        return CUDA_SUCCESS;
      }));
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return ncclInvalidUsage;
  if (--groupDepth > 0)
    return ncclSuccess;
  std::vector<PointToPoint> ops;
  ops.swap(grouped);
  if (ops.empty())
    return ncclSuccess;
  // Posted together, so that no send waits for a receive posted after it;
  // on the stream the group's first call named (megrt puts a group on one).
  return toNccl(State::get().enqueue(
      reinterpret_cast<CUstream>(ops.front().stream), "NCCL group", [ops] {
        runPointToPoint(ops);
        return CUDA_SUCCESS;
      }));
}

namespace {
ncclResult_t pointToPoint(PointToPoint op) {
  if (op.peer < 0 || op.peer >= op.comm->size ||
      !State::get().holds(reinterpret_cast<uint64_t>(op.buffer), op.bytes))
    return ncclInvalidArgument;
  if (groupDepth > 0) {
    grouped.push_back(op);
    return ncclSuccess;
  }
  return toNccl(State::get().enqueue(reinterpret_cast<CUstream>(op.stream),
                                     op.send ? "ncclSend" : "ncclRecv", [op] {
                                       runPointToPoint({op});
                                       return CUDA_SUCCESS;
                                     }));
}
} // namespace

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint({true, const_cast<void *>(send),
                       count * bytesOf(type), peer, comm, stream});
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint({false, recv, count * bytesOf(type), peer, comm, stream});
}

} // extern "C"

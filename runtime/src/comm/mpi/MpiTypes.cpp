// MPI datatypes and sum operations for megrt's dtypes.
#include "comm/mpi/MpiTypes.h"

#include "Fail.h"
#include "megrt/HalfFloat.h"

namespace megrt::comm::mpi {
namespace {

struct HalfFloatTypes {
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Op bf16Sum = MPI_OP_NULL, bf16Max = MPI_OP_NULL;
  MPI_Op f16Sum = MPI_OP_NULL, f16Max = MPI_OP_NULL;
};

HalfFloatTypes &halfFloatTypes() {
  static HalfFloatTypes types;
  return types;
}

template <float (*toFloat)(uint16_t), uint16_t (*fromFloat)(float)>
void sumHalves(void *in, void *inout, int *length, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i)
    b[i] = fromFloat(toFloat(a[i]) + toFloat(b[i]));
}

template <float (*toFloat)(uint16_t)>
void maxHalves(void *in, void *inout, int *length, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i)
    if (toFloat(a[i]) > toFloat(b[i]))
      b[i] = a[i];
}

void createHalfType(MPI_Datatype &type, MPI_Op &sum, MPI_Op &max,
                    MPI_User_function *sumFunction,
                    MPI_User_function *maxFunction, const char *name) {
  if (MPI_Type_contiguous(2, MPI_BYTE, &type) != MPI_SUCCESS ||
      MPI_Type_commit(&type) != MPI_SUCCESS ||
      MPI_Op_create(sumFunction, /*commute=*/1, &sum) != MPI_SUCCESS ||
      MPI_Op_create(maxFunction, /*commute=*/1, &max) != MPI_SUCCESS)
    fail("creating MPI's datatype, sum and max for ", name, " failed");
}

} // namespace

void createHalfFloatTypes() {
  HalfFloatTypes &types = halfFloatTypes();
  createHalfType(types.bf16, types.bf16Sum, types.bf16Max,
                 sumHalves<bf16ToFloat, floatToBf16>, maxHalves<bf16ToFloat>,
                 "bf16");
  createHalfType(types.f16, types.f16Sum, types.f16Max,
                 sumHalves<f16ToFloat, floatToF16>, maxHalves<f16ToFloat>,
                 "f16");
}

MPI_Datatype mpiDatatype(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::BF16:
    return halfFloatTypes().bf16;
  case DType::F16:
    return halfFloatTypes().f16;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  }
  fail("invalid dtype value ", static_cast<int>(dtype));
}

MPI_Op mpiReduction(DType dtype, ReduceOp op) {
  bool max = op == ReduceOp::Max;
  switch (dtype) {
  case DType::BF16:
    return max ? halfFloatTypes().bf16Max : halfFloatTypes().bf16Sum;
  case DType::F16:
    return max ? halfFloatTypes().f16Max : halfFloatTypes().f16Sum;
  default:
    return max ? MPI_MAX : MPI_SUM;
  }
}

void divideInPlace(void *data, size_t count, DType dtype, int divisor) {
  float scale = static_cast<float>(divisor);
  if (dtype == DType::F32) {
    auto *values = static_cast<float *>(data);
    for (size_t i = 0; i < count; ++i)
      values[i] /= scale;
    return;
  }
  auto *halves = static_cast<uint16_t *>(data);
  bool bf16 = dtype == DType::BF16;
  for (size_t i = 0; i < count; ++i)
    halves[i] = bf16 ? floatToBf16(bf16ToFloat(halves[i]) / scale)
                     : floatToF16(f16ToFloat(halves[i]) / scale);
}

} // namespace megrt::comm::mpi

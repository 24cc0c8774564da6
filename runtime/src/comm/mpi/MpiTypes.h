// MPI datatypes and sum and max operations for megrt's dtypes. MPI has no
// 16-bit floats: bf16 and f16 are 2-byte datatypes of their own whose sum
// and max are user-defined operations (in f32, the sum rounded to nearest
// even).
#ifndef MEGRT_SRC_COMM_MPI_MPITYPES_H
#define MEGRT_SRC_COMM_MPI_MPITYPES_H

#include "comm/Communicator.h"
#include "megrt/DType.h"

#include <mpi.h>

namespace megrt::comm::mpi {

/// Creates the 16-bit datatypes and operations; once, after MPI_Init.
void createHalfFloatTypes();

MPI_Datatype mpiDatatype(DType dtype);
/// The sum (for Sum and Avg, which divides afterwards) or maximum of
/// `dtype` elements.
MPI_Op mpiReduction(DType dtype, ReduceOp op);

/// Divides `count` elements of `data` by `divisor` in f32 arithmetic
/// (rounding 16-bit results to nearest even): Avg after a Sum.
void divideInPlace(void *data, size_t count, DType dtype, int divisor);

} // namespace megrt::comm::mpi

#endif // MEGRT_SRC_COMM_MPI_MPITYPES_H

// Fills a parameter tensor from its init spec.
#ifndef MEGRT_SRC_PARAMETERINIT_H
#define MEGRT_SRC_PARAMETERINIT_H

#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <cstdint>

namespace megrt {

class ThreadPool;

/// Element i of a normal or uniform parameter is a function of (seed,
/// parameter name, i) only. Keying by name rather than by position keeps the
/// values of a parameter unchanged when a compiler option reorders or adds
/// parameters, so programs compiled with and without a pass compare equal.
/// Values are computed in double, rounded to f32, then (for bf16/f16) to the
/// parameter's dtype.
/// Copies (InitKind::Copy) are filled by copyParameter instead.
///
/// With a `pool`, chunks of the tensor are filled on its threads (the
/// values do not depend on it); without, on the calling thread. The same
/// holds for the functions below.
void initializeParameter(Tensor &tensor, const ParameterSpec &spec,
                         uint64_t seed, ThreadPool *pool = nullptr);

/// A piece of a parameter: element i of `tensor` is element first + i of
/// the tensor of `totalElements` elements that initializeParameter would
/// fill, or zero from totalElements on (the padding of a sharded
/// parameter), so that every rank's piece equals that of a single rank.
void initializeParameterPiece(Tensor &tensor, const ParameterSpec &spec,
                              uint64_t seed, int64_t first,
                              int64_t totalElements,
                              ThreadPool *pool = nullptr);

/// Block `index` of `count` along `dim` of the tensor of shape `fullShape`
/// that initializeParameter would fill (a tensor-parallel parameter), so
/// that every rank's block equals that of a single rank.
void initializeParameterBlock(Tensor &tensor, const ParameterSpec &spec,
                              uint64_t seed, const Shape &fullShape, int dim,
                              int64_t index, ThreadPool *pool = nullptr);

/// Elements [first, first + n) of the flattened block `index` along `dim`
/// (of `blocks` blocks) of the tensor of shape `fullShape`, zero past the
/// block's end: a piece of a tensor-parallel block under FSDP.
void initializeParameterPieceOfBlock(Tensor &tensor, const ParameterSpec &spec,
                                     uint64_t seed, const Shape &fullShape,
                                     int dim, int64_t blocks, int64_t index,
                                     int64_t first, ThreadPool *pool = nullptr);

/// Where element i of block `index` along `dim` of a tensor of shape
/// `fullShape` (cut into blocks of `blockExtent`) lies in that tensor,
/// counting row-major.
int64_t blockElementIndex(const Shape &fullShape, int dim, int64_t blockExtent,
                          int64_t index, int64_t i);

/// `to` = `from` converted to `to`'s floating-point dtype (same shape),
/// rounding to nearest even.
void copyParameter(Tensor &to, const Tensor &from);

/// Element i of `to` is element first + i of `from` converted to `to`'s
/// dtype, or zero past the end of `from`.
void copyParameterPiece(Tensor &to, const Tensor &from, int64_t first);

} // namespace megrt

#endif // MEGRT_SRC_PARAMETERINIT_H

// A host build of the runtime's embedding-gradient kernels for the
// stand-in: the same source, CUDA's constructs mapped by CudaOnHost.h and
// CUB's block scan by include/cub.
#include "CudaOnHost.h"

#include "cuda/embedding/EmbeddingGrad.cu"

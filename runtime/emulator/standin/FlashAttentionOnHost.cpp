// A host build of the runtime's flash-attention kernels for the stand-in:
// the same source, CUDA's constructs mapped by CudaOnHost.h. The kernels'
// dynamic shared memory is one array per host thread (blocks run one at a
// time), as large as a block may have.
#include "CudaOnHost.h"

#include "cuda/attention/FlashAttention.cu"

thread_local megrt::attention::Float4
    attentionShared[227 * 1024 / sizeof(megrt::attention::Float4)];

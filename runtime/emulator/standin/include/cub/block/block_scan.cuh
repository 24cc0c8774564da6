// What the host builds of the runtime's CUDA kernels use of CUB's
// BlockScan (the embedding gradient's offsets), on the GPU emulator: each
// thread's items summed, the threads' sums exchanged through shared memory
// between two barriers. Test code only: the GPU build uses CUB itself.
#ifndef MEGEMU_STANDIN_CUB_BLOCK_BLOCK_SCAN_CUH
#define MEGEMU_STANDIN_CUB_BLOCK_BLOCK_SCAN_CUH

// Included through a .cu file after CudaOnHost.h, whose threadIdx and
// __syncthreads it uses.
namespace cub {

template <typename T, int Threads> class BlockScan {
public:
  struct TempStorage {
    T sums[Threads];
  };

  explicit BlockScan(TempStorage &storage) : storage_(storage) {}

  /// out[i] = the sum of the block's items up to and including this
  /// thread's in[i] (threads in order, then items); total = all of them.
  template <int Items>
  void InclusiveSum(T (&in)[Items], T (&out)[Items], T &total) {
    unsigned thread = threadIdx.x;
    T own = T();
    for (int i = 0; i < Items; ++i)
      own += in[i];
    storage_.sums[thread] = own;
    __syncthreads();
    T before = T();
    total = T();
    for (int t = 0; t < Threads; ++t) {
      if (static_cast<unsigned>(t) < thread)
        before += storage_.sums[t];
      total += storage_.sums[t];
    }
    __syncthreads();
    T running = before;
    for (int i = 0; i < Items; ++i) {
      running += in[i];
      out[i] = running;
    }
  }

private:
  TempStorage &storage_;
};

} // namespace cub

#endif // MEGEMU_STANDIN_CUB_BLOCK_BLOCK_SCAN_CUH

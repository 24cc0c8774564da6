// The interface between kernels lowered for emulation (megc's
// meg-gpu-to-host-emulation) and the GPU emulator that runs them: the hooks
// a kernel calls, their argument encodings, and the symbols of a kernel
// library. Included by the compiler's lowering and by the emulator, so that
// both read one description.
#ifndef MEGEMU_ABI_H
#define MEGEMU_ABI_H

#include <cstdint>

namespace megemu {

/// Version of this interface; a kernel library records the one it was made
/// for (the manifest's "abi"), and the emulator refuses any other.
constexpr int kAbiVersion = 1;

/// The hooks, in the order of the library's `megemu_hooks` table, with the
/// name of the function the lowering declares for each. Every argument and
/// result is an i32 or an i64 (no i1: its C ABI is not portable).
///   int64 megemu_id(int32 which)                         (Id below)
///   void  megemu_barrier(int32 site)
///   int64 megemu_shuffle(int64 bits, int32 offset, int32 width,
///                        int32 mode, int32 site)           (Shuffle below)
///   int32 megemu_shuffle_valid()   the calling lane's last shuffle read a
///                                  lane inside its segment
///   void  megemu_access(int64 address, int64 bytes, int32 flags,
///                       int32 buffer, int32 site, int32 inView)
enum Hook : int {
  kHookId,
  kHookBarrier,
  kHookShuffle,
  kHookShuffleValid,
  kHookAccess,
  kHookCount
};
constexpr const char *kHookNames[kHookCount] = {
    "megemu_id", "megemu_barrier", "megemu_shuffle", "megemu_shuffle_valid",
    "megemu_access"};

/// megemu_id's argument: a dimension (0 x, 1 y, 2 z) plus one of these.
enum Id : int32_t {
  kThreadId = 0,
  kBlockId = 3,
  kBlockDim = 6,
  kGridDim = 9,
  kLaneId = 12,
};

/// megemu_shuffle's mode, as gpu.shuffle's (and PTX shfl's) modes.
enum ShuffleMode : int32_t { kShuffleXor, kShuffleUp, kShuffleDown, kShuffleIdx };

/// megemu_access's flags: what the access does, and the base-2 logarithm of
/// the alignment the hardware requires of its address in bits 8-15.
enum AccessFlags : int32_t {
  kRead = 1,
  kWrite = 2,
  /// An atomic read-modify-write: never a race with another atomic.
  kAtomic = 4,
};
constexpr int kAlignShift = 8;

/// megemu_access's buffer: a kernel argument's index (the workgroup buffers
/// follow the arguments), or one of these.
enum SpecialBuffer : int32_t {
  /// A constant the kernel module holds (memref.global).
  kConstantBuffer = -1,
  /// A thread's private buffer.
  kPrivateBuffer = -2,
};

/// Symbols of a kernel library (a shared object):
///   void <kernel>_emu(void **args)   one thread of `kernel`; args holds the
///                                    kernel's arguments, then its workgroup
///                                    buffers
///   void *megemu_hooks[kHookCount]   filled by the emulator before any call
///   const char megemu_manifest[]     JSON: {"abi": N, "kernels": [{"name",
///                                    "args": count, "extents": [bytes from
///                                    each argument's pointer that its
///                                    type spans, -1 when dynamic],
///                                    "workgroup": [{"bytes", "align"}]}],
///                                    "sites": ["what and where", ...]}
constexpr const char *kEntrySuffix = "_emu";
constexpr const char *kHooksSymbol = "megemu_hooks";
constexpr const char *kManifestSymbol = "megemu_manifest";

} // namespace megemu

#endif // MEGEMU_ABI_H

// RUN: megc-opt %s --pass-pipeline='builtin.module(gpu.module(meg-align-workgroup-buffers))' | FileCheck %s
// RUN: megc-opt %s --pass-pipeline='builtin.module(gpu.module(meg-align-workgroup-buffers{alignment=64}))' | FileCheck %s --check-prefix=WIDE
// RUN: megc-opt %s --pass-pipeline='builtin.module(gpu.module(meg-align-workgroup-buffers,convert-gpu-to-nvvm))' | FileCheck %s --check-prefix=NVVM
// RUN: not megc-opt %s --pass-pipeline='builtin.module(gpu.module(meg-align-workgroup-buffers{alignment=12}))' 2>&1 | FileCheck %s --check-prefix=BAD

// Every workgroup buffer gets 16-byte alignment, which the shared-memory
// globals of convert-gpu-to-nvvm take; a larger one is kept.
// CHECK: workgroup(%{{.*}} : memref<2x1024xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// WIDE: workgroup(%{{.*}} : memref<2x1024xbf16, #gpu.address_space<workgroup>> {llvm.align = 64 : i64}, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64})
// NVVM: llvm.mlir.global internal @__wg_k_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<2048 x bf16>
// NVVM: llvm.mlir.global internal @__wg_k_1() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<16 x f32>
// BAD: meg-align-workgroup-buffers: alignment 12 is not a power of two
gpu.module @kernels {
  gpu.func @k(%out: memref<4xf32>) workgroup(%tile : memref<2x1024xbf16, #gpu.address_space<workgroup>>, %pairs : memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %v = memref.load %tile[%c0, %c0] : memref<2x1024xbf16, #gpu.address_space<workgroup>>
    %f = arith.extf %v : bf16 to f32
    %p = memref.load %pairs[%c0] : memref<16xf32, #gpu.address_space<workgroup>>
    %s = arith.addf %f, %p : f32
    memref.store %s, %out[%c0] : memref<4xf32>
    gpu.return
  }
}

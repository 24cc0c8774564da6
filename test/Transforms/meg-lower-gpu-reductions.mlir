// RUN: megc-opt %s -split-input-file --pass-pipeline="builtin.module(gpu.module(meg-lower-gpu-reductions))" -verify-diagnostics | FileCheck %s

// A warp reduction becomes five xor shuffles (offsets 1 to 16 over 32
// lanes), each followed by the combiner.
// CHECK-LABEL: gpu.func @warp
// CHECK-NOT: gpu.subgroup_reduce
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: arith.maximumf
// CHECK: gpu.return
gpu.module @warp_module {
  gpu.func @warp(%x: memref<32xf32>, %y: memref<1xf32>) kernel {
    %c0 = arith.constant 0 : index
    %t = gpu.thread_id x
    %v = memref.load %x[%t] : memref<32xf32>
    %m = gpu.subgroup_reduce maximumf %v uniform : (f32) -> f32
    memref.store %m, %y[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

// A block reduction: shuffles within each warp, one value per warp in a
// shared-memory buffer (a workgroup attribution of 32 floats), barriers,
// and a second round of shuffles over the warps' values.
// CHECK-LABEL: gpu.func @block
// CHECK-SAME: workgroup(%[[BUF:.*]] : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: gpu.all_reduce
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[BUF]]
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: memref.load %[[BUF]]
gpu.module @block_module {
  gpu.func @block(%x: memref<256xf32>, %y: memref<1xf32>) kernel {
    %c0 = arith.constant 0 : index
    %t = gpu.thread_id x
    %v = memref.load %x[%t] : memref<256xf32>
    %s = gpu.all_reduce add %v uniform {} : (f32) -> f32
    memref.store %s, %y[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

// Its lowering splits blocks, which structured control flow cannot hold.
gpu.module @structured_module {
  gpu.func @structured(%x: memref<256xf32>, %y: memref<4xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %t = gpu.thread_id x
    scf.for %i = %c0 to %c4 step %c1 {
      %v = memref.load %x[%t] : memref<256xf32>
      // expected-error @below {{meg-lower-gpu-reductions: the block reduction is inside structured control flow}}
      %s = gpu.all_reduce add %v uniform {} : (f32) -> f32
      memref.store %s, %y[%i] : memref<4xf32>
    }
    gpu.return
  }
}

// -----

// A 64-bit reduction has no 32-bit shuffle lowering.
gpu.module @wide_module {
  gpu.func @wide(%x: memref<32xf64>, %y: memref<1xf64>) kernel {
    %c0 = arith.constant 0 : index
    %t = gpu.thread_id x
    %v = memref.load %x[%t] : memref<32xf64>
    // expected-error @below {{meg-lower-gpu-reductions: no lowering for this reduction}}
    %m = gpu.subgroup_reduce add %v uniform : (f64) -> f64
    memref.store %m, %y[%c0] : memref<1xf64>
    gpu.return
  }
}

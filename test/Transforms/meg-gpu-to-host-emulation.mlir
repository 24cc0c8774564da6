// RUN: megc-opt %s --meg-gpu-to-host-emulation | FileCheck %s
// RUN: megc-opt %s --meg-lower-gpu-emulation | FileCheck %s --check-prefix=LLVM

// A kernel becomes a host function of its arguments and workgroup buffers
// (the address space dropped); ids, barriers and shuffles call the
// emulator; each access is announced first: its address (pointer plus the
// linearised index times the element's bytes), bytes, flags (read 1 or
// write 2, alignment log2 in bits 8-15), buffer (argument 0, workgroup
// buffer 1), site and whether its indices are in the view.
// The sites name the op and its location.
// CHECK: megemu.sites = ["memref.load at loc(
// CHECK-SAME: "gpu.barrier at
// CHECK-NOT: gpu.module
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[A:.*]]: memref<64xf32, strided<[1], offset: 8>>, %[[W:.*]]: memref<32xf32>)
// CHECK-SAME: megemu.args = 1 : i64
// CHECK-SAME: megemu.extents = [288]
// CHECK-SAME: megemu.workgroup = {{\[}}[128, 16]]
// CHECK: %[[T:.*]] = call @megemu_id(%c0_i32) : (i32) -> index
// CHECK: memref.extract_strided_metadata %[[A]]
// CHECK: arith.cmpi ult, %[[T]]
// CHECK: %[[INVIEW:.*]] = arith.andi
// CHECK: %[[EXT:.*]] = arith.extui %[[INVIEW]] : i1 to i32
// CHECK: call @megemu_access(%{{.*}}, %c4_i64, %c513_i32, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %[[EXT]])
// CHECK: memref.load %[[A]][%[[T]]]
// CHECK: call @megemu_access(%{{.*}}, %c4_i64{{[_0-9]*}}, %c514_i32, %c1_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}},
// CHECK: memref.store %{{.*}}, %[[W]][%[[T]]] : memref<32xf32>
// CHECK: call @megemu_barrier(%c2_i32)
// CHECK: %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK: %[[WIDE:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK: call @megemu_shuffle(%[[WIDE]], %c1_i32{{[_0-9]*}}, %c32_i32, %c0_i32{{[_0-9]*}}, %c3_i32)
// CHECK: call @megemu_shuffle_valid()
// A 16-byte vector needs 16-byte alignment (flags 4 << 8 | 1), and its
// last lane in the view.
// CHECK: arith.addi %{{.*}}, %c3 : index
// CHECK: call @megemu_access(%{{.*}}, %c16_i64, %c1025_i32, %c0_i32{{[_0-9]*}}, %c5_i32,
// CHECK: vector.load %[[A]]
// CHECK: return
// LLVM: llvm.func @megemu_access(i64, i64, i32, i32, i32, i32)
// LLVM: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// LLVM: llvm.call @megemu_access
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%a: memref<64xf32, strided<[1], offset: 8>>) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
      %t = gpu.thread_id x
      %v = memref.load %a[%t] : memref<64xf32, strided<[1], offset: 8>>
      memref.store %v, %w[%t] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %s, %valid = gpu.shuffle xor %v, %c1, %c32 : f32
      %c0 = arith.constant 0 : index
      %x = memref.load %w[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
      %vec = vector.load %a[%t] : memref<64xf32, strided<[1], offset: 8>>, vector<4xf32>
      gpu.return
    }
  }
}


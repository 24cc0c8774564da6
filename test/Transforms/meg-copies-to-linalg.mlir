// RUN: megc-opt %s --meg-copies-to-linalg | FileCheck %s

// A strided memref.copy (a call into MLIR's C runner library once lowered)
// becomes a linalg.copy, loops of the kernel.
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<4x16xf32>)
// CHECK: %[[V:.*]] = memref.subview %[[B]]
// CHECK-NEXT: linalg.copy ins(%[[A]] : memref<4x8xf32>) outs(%[[V]] : memref<4x8xf32, strided<[16, 1], offset: 8>>)
// CHECK-NOT: memref.copy
func.func @k(%a: memref<4x8xf32>, %b: memref<4x16xf32>) {
  %v = memref.subview %b[0, 8] [4, 8] [1, 1] : memref<4x16xf32> to memref<4x8xf32, strided<[16, 1], offset: 8>>
  memref.copy %a, %v : memref<4x8xf32> to memref<4x8xf32, strided<[16, 1], offset: 8>>
  return
}

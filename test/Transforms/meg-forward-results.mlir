// RUN: megc-opt %s -split-input-file --meg-forward-results | FileCheck %s

// A result computed in a temporary and copied out at the end is computed
// in the out-parameter.
// CHECK-LABEL: func.func @loop_result(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: memref<4xindex>, %[[OUT:[a-z0-9]+]]: memref<16xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<16xf32>)
// CHECK: memref.load %[[OUT]]
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT: linalg.copy
func.func @loop_result(%ids: memref<4xindex>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = memref.alloc() : memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<16xf32>)
  scf.for %i = %c0 to %c4 step %c1 {
    %id = memref.load %ids[%i] : memref<4xindex>
    %v = memref.load %t[%id] : memref<16xf32>
    %w = arith.addf %v, %one : f32
    memref.store %w, %t[%id] : memref<16xf32>
  }
  linalg.copy ins(%t : memref<16xf32>) outs(%out : memref<16xf32>)
  return
}

// -----

// Copied into two outputs: the temporary becomes the last one, which the
// first copy then reads.
// CHECK-LABEL: func.func @two_outputs(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<16xf32>, %[[OUT:[a-z0-9]+]]: memref<16xf32>, %[[ALSO:[a-z0-9]+]]: memref<16xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.copy ins(%[[X]] : memref<16xf32>) outs(%[[ALSO]] : memref<16xf32>)
// CHECK-NEXT: linalg.copy ins(%[[ALSO]] : memref<16xf32>) outs(%[[OUT]] : memref<16xf32>)
// CHECK-NEXT: return
func.func @two_outputs(%x: memref<16xf32>, %out: memref<16xf32>, %also: memref<16xf32>) {
  %t = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
  linalg.copy ins(%t : memref<16xf32>) outs(%out : memref<16xf32>)
  linalg.copy ins(%t : memref<16xf32>) outs(%also : memref<16xf32>)
  return
}

// -----

// The out-parameter is also written elsewhere: the temporary stays.
// CHECK-LABEL: func.func @written_twice(
// CHECK: memref.alloc
// CHECK: linalg.copy
// CHECK: linalg.copy
func.func @written_twice(%x: memref<16xf32>, %out: memref<16xf32>) {
  %t = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%out : memref<16xf32>)
  linalg.copy ins(%out : memref<16xf32>) outs(%t : memref<16xf32>)
  linalg.copy ins(%t : memref<16xf32>) outs(%out : memref<16xf32>)
  return
}

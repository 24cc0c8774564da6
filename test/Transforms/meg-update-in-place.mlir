// RUN: megc-opt %s -split-input-file --meg-update-in-place -verify-diagnostics | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// An optimizer update: results 0 and 2 overwrite arguments 0 and 2; their
// out-parameters go, and the kernel writes the state it reads. Result 1
// keeps its own buffer.
// CHECK-LABEL: func.func @update(
// CHECK-SAME: %[[P:[a-z0-9]+]]: memref<8xf32>, %[[G:[a-z0-9]+]]: memref<8xf32>, %[[M:[a-z0-9]+]]: memref<8xf32>, %[[OUT:[a-z0-9]+]]: memref<8xf32>)
// CHECK-NOT: meg.in_place
// CHECK: linalg.generic {{.*}} ins(%[[P]], %[[G]], %[[M]] : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[P]], %[[OUT]], %[[M]] : memref<8xf32>, memref<8xf32>, memref<8xf32>)
func.func @update(%p: memref<8xf32>, %g: memref<8xf32>, %m: memref<8xf32>,
                  %newP: memref<8xf32>, %out: memref<8xf32>, %newM: memref<8xf32>)
    attributes {meg.in_place = array<i64: 0, -1, 2>} {
  linalg.generic {indexing_maps = [#id, #id, #id, #id, #id, #id],
                  iterator_types = ["parallel"]}
      ins(%p, %g, %m : memref<8xf32>, memref<8xf32>, memref<8xf32>)
      outs(%newP, %out, %newM : memref<8xf32>, memref<8xf32>, memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32, %e: f32, %f: f32):
    %s = arith.subf %a, %b : f32
    %t = arith.addf %c, %b : f32
    linalg.yield %s, %b, %t : f32, f32, f32
  }
  return
}

// -----

// expected-error @below {{meg.in_place: result 0 of type 'memref<4xf32>' cannot update argument 0 of type 'memref<8xf32>'}}
func.func @mismatch(%p: memref<8xf32>, %out: memref<4xf32>)
    attributes {meg.in_place = array<i64: 0>} {
  return
}

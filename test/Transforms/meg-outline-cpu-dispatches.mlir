// RUN: megc-opt %s --meg-outline-cpu-dispatches | FileCheck %s

// Each dispatch of a kernel becomes a function of the buffers it uses (a
// kernel argument, a temporary), each noalias, and the workgroup id;
// constants, globals and views are rebuilt inside. The forall then only
// calls it: the kernel function describes its dispatches.
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<64x128xf32>, %[[Y:[a-z0-9]+]]: memref<64x128xf32>)
// CHECK: %[[T:.*]] = memref.alloc() : memref<64x128xf32>
// CHECK: scf.forall (%[[WG:.*]]) in (4) {
// CHECK-NEXT: func.call @k_d0(%[[X]], %[[T]], %[[WG]]) : (memref<64x128xf32>, memref<64x128xf32>, index) -> ()
// CHECK-NEXT: }
// CHECK: scf.forall (%[[WG1:.*]]) in (1) {
// CHECK-NEXT: func.call @k_d1(%[[T]], %[[Y]], %[[WG1]])
// CHECK-LABEL: func.func @k_d1(
// CHECK-SAME: %{{.*}}: memref<64x128xf32> {llvm.noalias}, %{{.*}}: memref<64x128xf32> {llvm.noalias}, %{{.*}}: index)
// CHECK-NEXT: memref.get_global @scale
// CHECK-LABEL: func.func @k_d0(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<64x128xf32> {llvm.noalias}, %{{.*}}: memref<64x128xf32> {llvm.noalias}, %[[ID:[a-z0-9]+]]: index)
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: %[[ROW:.*]] = affine.apply #{{.*}}(%[[ID]])
// CHECK: memref.subview %[[A]][%[[ROW]], 0] [16, 128] [1, 1]

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0) -> (d0 * 16)>
module {
  memref.global "private" constant @scale : memref<128xf32> = dense<2.0>
  func.func @k(%x: memref<64x128xf32>, %y: memref<64x128xf32>) attributes {
      meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [64, 128], tile = [16, 128], vector = 4>} {
    %t = memref.alloc() : memref<64x128xf32>
    %s = memref.get_global @scale : memref<128xf32>
    %one = arith.constant 1.0 : f32
    scf.forall (%wg) in (4) {
      %r = affine.apply #rows(%wg)
      %a = memref.subview %x[%r, 0] [16, 128] [1, 1] : memref<64x128xf32> to memref<16x128xf32, strided<[128, 1], offset: ?>>
      %b = memref.subview %t[%r, 0] [16, 128] [1, 1] : memref<64x128xf32> to memref<16x128xf32, strided<[128, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%a : memref<16x128xf32, strided<[128, 1], offset: ?>>) outs(%b : memref<16x128xf32, strided<[128, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %v = arith.addf %in, %one : f32
        linalg.yield %v : f32
      }
    }
    scf.forall (%wg) in (1) {
      linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>, #id], iterator_types = ["parallel", "parallel"]}
          ins(%t, %s : memref<64x128xf32>, memref<128xf32>) outs(%y : memref<64x128xf32>) {
      ^bb0(%in: f32, %c: f32, %out: f32):
        %v = arith.mulf %in, %c : f32
        linalg.yield %v : f32
      }
    }
    return
  }
}

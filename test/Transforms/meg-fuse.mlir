// RUN: megc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(meg-fuse))' | FileCheck %s

// The residual add joins the rms_norm after it; the matrix product stays
// outside and the add's operands become the region's inputs.
// CHECK-LABEL: func.func @add_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>, %[[R:.*]]: tensor<2x16x64xf32>, %[[W:.*]]: tensor<64xf32>, %[[M:.*]]: tensor<64x64xf32>)
// CHECK: %[[F:.*]] = meg.fusion(%[[X]], %[[R]], %[[W]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x16x64xf32>, %[[B:.*]]: tensor<2x16x64xf32>, %[[C:.*]]: tensor<64xf32>):
// CHECK-NEXT: %[[S:.*]] = meg.add %[[A]], %[[B]]
// CHECK-NEXT: %[[N:.*]] = meg.rms_norm %[[S]], %[[C]]
// CHECK-NEXT: meg.yield %[[N]]
// CHECK: meg.matmul %[[F]], %[[M]]
func.func @add_norm(%x: tensor<2x16x64xf32>, %r: tensor<2x16x64xf32>,
                    %w: tensor<64xf32>, %m: tensor<64x64xf32>) -> tensor<2x16x64xf32> {
  %h = meg.add %x, %r : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %y = meg.matmul %n, %m : tensor<2x16x64xf32>, tensor<64x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// The residual sum is also a result of the function, so it is computed
// once outside; the norm, the activation, the gate, the scaling (its
// constant cloned into the region) and the next residual add fuse.
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[H:.*]] = meg.add
// CHECK: meg.fusion(%[[H]],
// CHECK: arith.constant dense<2.000000e+00>
// CHECK-NEXT: meg.rms_norm
// CHECK-NEXT: meg.silu
// CHECK-NEXT: meg.mul
// CHECK-NEXT: meg.mul
// CHECK-NEXT: meg.add
// CHECK-NEXT: meg.yield
func.func @shared_producer(%x: tensor<2x16x64xf32>, %r: tensor<2x16x64xf32>,
                           %w: tensor<64xf32>, %u: tensor<2x16x64xf32>)
    -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %h = meg.add %x, %r : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %s = meg.silu %n : tensor<2x16x64xf32>
  %g = meg.mul %s, %u : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  %d = meg.mul %g, %two : tensor<2x16x64xf32>, tensor<f32>
  %o = meg.add %h, %d : tensor<2x16x64xf32>, tensor<2x16x64xf32>
  return %o, %h : tensor<2x16x64xf32>, tensor<2x16x64xf32>
}

// -----

// At most one row reduction per region: softmax after rms_norm starts its
// own region, and a lone op is left as it is.
// CHECK-LABEL: func.func @two_reductions
// CHECK: %[[N:.*]] = meg.rms_norm
// CHECK: meg.fusion(%[[N]])
// CHECK: meg.exp
// CHECK-NEXT: meg.softmax
// CHECK-NEXT: meg.yield
// CHECK-NOT: meg.fusion
// CHECK: meg.neg
func.func @two_reductions(%x: tensor<2x16x64xf32>, %w: tensor<64xf32>)
    -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>) {
  %n = meg.rms_norm %x, %w eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %e = meg.exp %n : tensor<2x16x64xf32>
  %s = meg.softmax %e axis 2 : tensor<2x16x64xf32>
  %m = meg.neg %x : tensor<2x16x64xf32>
  return %s, %m : tensor<2x16x64xf32>, tensor<2x16x64xf32>
}

// -----

// Horizontal fusion: independent elementwise work over one shape (the
// cosine and sine tables of RoPE) becomes one region with two results,
// placed before the matrix product that reads both.
// CHECK-LABEL: func.func @horizontal
// CHECK: %[[F:.*]]:2 = meg.fusion(%arg0) : (tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<16x8xf32>):
// CHECK-NEXT: %[[C:.*]] = meg.cos %[[A]]
// CHECK-NEXT: %[[S:.*]] = meg.sin %[[A]]
// CHECK-NEXT: meg.yield %[[C]], %[[S]]
// CHECK: meg.matmul %[[F]]#0, %[[F]]#1
func.func @horizontal(%x: tensor<16x8xf32>) -> tensor<16x16xf32> {
  %c = meg.cos %x : tensor<16x8xf32>
  %s = meg.sin %x : tensor<16x8xf32>
  %m = meg.matmul %c, %s transpose_rhs : tensor<16x8xf32>, tensor<16x8xf32>
  return %m : tensor<16x16xf32>
}

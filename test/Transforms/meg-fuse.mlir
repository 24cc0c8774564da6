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

// -----

// A cross-entropy and its gradient on the same logits and labels become
// one region where the gradient stands (one kernel computing the row
// statistics once for both); the count of non-finite losses between them,
// which the gradient does not read, moves after the region.
// CHECK-LABEL: func.func @loss_with_gradient
// CHECK-SAME: (%[[L:.*]]: tensor<4x32xf32>, %[[Y:.*]]: tensor<4xi32>, %[[N:.*]]: tensor<f32>)
// CHECK: %[[F:.*]]:2 = meg.fusion(%[[L]], %[[Y]], %[[N]], %[[D:.*]]) : {{.*}} -> (tensor<f32>, tensor<4x32xf32>)
// CHECK: meg.cross_entropy
// CHECK: meg.div
// CHECK: meg.cross_entropy_grad
// CHECK: meg.yield
// CHECK: meg.count_nonfinite %[[F]]#0
// CHECK: return %[[F]]#0, %{{.*}}, %[[F]]#1
func.func @loss_with_gradient(%logits: tensor<4x32xf32>, %labels: tensor<4xi32>, %n: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<4x32xf32>) {
  %sum = meg.cross_entropy %logits, %labels sum ignore -100 : tensor<4x32xf32>, tensor<4xi32>
  %loss = meg.div %sum, %n : tensor<f32>, tensor<f32>
  %bad = meg.count_nonfinite %loss : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dloss = meg.div %one, %n : tensor<f32>, tensor<f32>
  %g = meg.cross_entropy_grad %dloss, %logits, %labels sum ignore -100 : tensor<4x32xf32>, tensor<4xi32>
  return %loss, %bad, %g : tensor<f32>, tensor<f32>, tensor<4x32xf32>
}

// -----

// Kept apart: a loss over a chunk of tokens (its gradient recomputes the
// chunk's logits later), and a gradient on other logits.
// CHECK-LABEL: func.func @loss_kept_apart
// CHECK: meg.cross_entropy %{{.*}} {meg.loss_chunk = 0 : i64}
// CHECK-NEXT: meg.cross_entropy_grad
// CHECK-NEXT: meg.cross_entropy %
// CHECK-NEXT: meg.cross_entropy_grad
// CHECK-NOT: meg.fusion
func.func @loss_kept_apart(%logits: tensor<4x32xf32>, %other: tensor<4x32xf32>, %labels: tensor<4xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<4x32xf32>, tensor<f32>, tensor<4x32xf32>) {
  %a = meg.cross_entropy %logits, %labels sum ignore -100 {meg.loss_chunk = 0 : i64} : tensor<4x32xf32>, tensor<4xi32>
  %ga = meg.cross_entropy_grad %d, %logits, %labels sum ignore -100 : tensor<4x32xf32>, tensor<4xi32>
  %b = meg.cross_entropy %logits, %labels sum ignore -100 : tensor<4x32xf32>, tensor<4xi32>
  %gb = meg.cross_entropy_grad %d, %other, %labels sum ignore -100 : tensor<4x32xf32>, tensor<4xi32>
  return %a, %ga, %b, %gb : tensor<f32>, tensor<4x32xf32>, tensor<f32>, tensor<4x32xf32>
}

// -----

// A gradient summed over micro-batches: each sum stays with its
// micro-batch (a region runs where its last op stands, so fusing the chain
// would keep every micro-batch's gradient alive until the last); the mean
// joins the last sum. Horizontal fusion keeps micro-batches apart too.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[S1:.*]] = meg.fusion({{.*}}) {meg.micro_batch = 1 : i64}
// CHECK: meg.mul
// CHECK-NEXT: meg.add
// CHECK-NEXT: meg.yield
// CHECK: %[[S2:.*]] = meg.fusion({{.*}}%[[S1]]) {meg.micro_batch = 2 : i64}
// CHECK: meg.mul
// CHECK-NEXT: meg.add
// CHECK-NEXT: meg.yield
// CHECK: meg.fusion({{.*}}%[[S2]]) :
// CHECK: meg.mul
// CHECK-NEXT: meg.add
// CHECK-NEXT: meg.mul
// CHECK-NEXT: meg.yield
func.func @accumulate(%g0: tensor<4x4xf32>, %x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %q = arith.constant dense<2.500000e-01> : tensor<f32>
  %g1 = meg.mul %x, %x {meg.micro_batch = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %s1 = meg.add %g0, %g1 {meg.micro_batch = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %g2 = meg.mul %y, %y {meg.micro_batch = 2 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %s2 = meg.add %s1, %g2 {meg.micro_batch = 2 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %g3 = meg.mul %x, %y {meg.micro_batch = 3 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %s3 = meg.add %s2, %g3 {meg.micro_batch = 3 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %m = meg.mul %s3, %q : tensor<4x4xf32>, tensor<f32>
  return %m : tensor<4x4xf32>
}

// RUN: megc-opt %s --split-input-file --meg-chunk-loss=chunks=2 --verify-diagnostics | FileCheck %s

// The final norm, LM head and cross-entropy over two chunks of the 16
// tokens, each summing its cross-entropy, scaled to the mean.
// CHECK-LABEL: func.func @loss
// CHECK: %[[ROWS:.*]] = meg.reshape %arg0 : tensor<2x8x32xf32> to tensor<16x32xf32>
// CHECK: %[[LABELS:.*]] = meg.reshape %arg1 : tensor<2x8xi32> to tensor<16xi32>
// CHECK: %[[H0:.*]] = meg.slice %[[ROWS]] [0, 0] [8, 32] [1, 1] {meg.loss_chunk = 0 : i64}
// CHECK: %[[Y0:.*]] = meg.slice %[[LABELS]] [0] [8] [1] {meg.loss_chunk = 0 : i64}
// CHECK: %[[N0:.*]] = meg.rms_norm %[[H0]], %{{.*}} eps 1.000000e-05 {meg.loss_chunk = 0 : i64}
// CHECK: %[[L0:.*]] = meg.linear %[[N0]], %{{.*}} {meg.loss_chunk = 0 : i64} : tensor<8x32xf32>, tensor<64x32xf32>
// CHECK: %[[S0:.*]] = meg.cross_entropy %[[L0]], %[[Y0]] sum {meg.loss_chunk = 0 : i64}
// CHECK: meg.slice %[[ROWS]] [8, 0] [8, 32] [1, 1] {meg.loss_chunk = 1 : i64}
// CHECK: %[[S1:.*]] = meg.cross_entropy %{{.*}}, %{{.*}} sum {meg.loss_chunk = 1 : i64}
// CHECK: %[[SUM:.*]] = meg.add %[[S0]], %[[S1]]
// CHECK: %[[MEAN:.*]] = meg.mul %[[SUM]], %{{.*}} : tensor<f32>, tensor<f32>
// CHECK: return %[[MEAN]]
// The forward keeps its full logits.
// CHECK-LABEL: func.func @forward
// CHECK: meg.linear {{.*}} : tensor<2x8x32xf32>, tensor<64x32xf32>
// CHECK-NOT: meg.loss_chunk
module {
  meg.param @norm : tensor<32xf32> init #meg.init<ones>
  meg.param @head : tensor<64x32xf32> init #meg.init<normal(0.02)>
  func.func @loss(%h: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
    %w = meg.param_ref @norm : tensor<32xf32>
    %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x8x32xf32>, tensor<32xf32>
    %head = meg.param_ref @head : tensor<64x32xf32>
    %logits = meg.linear %n, %head : tensor<2x8x32xf32>, tensor<64x32xf32>
    %l = meg.cross_entropy %logits, %labels mean : tensor<2x8x64xf32>, tensor<2x8xi32>
    return %l : tensor<f32>
  }
  func.func @forward(%h: tensor<2x8x32xf32>) -> tensor<2x8x64xf32> {
    %w = meg.param_ref @norm : tensor<32xf32>
    %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x8x32xf32>, tensor<32xf32>
    %head = meg.param_ref @head : tensor<64x32xf32>
    %logits = meg.linear %n, %head : tensor<2x8x32xf32>, tensor<64x32xf32>
    return %logits : tensor<2x8x64xf32>
  }
}


// -----

// A loss that ignores padding: each chunk's sum ignores the same label, and
// the division by the label count stays after the chunks.
// CHECK-LABEL: func.func @loss
// CHECK: meg.cross_entropy %{{.*}}, %{{.*}} sum ignore -100 {meg.loss_chunk = 0 : i64}
// CHECK: meg.cross_entropy %{{.*}}, %{{.*}} sum ignore -100 {meg.loss_chunk = 1 : i64}
// CHECK: %[[SUM:.*]] = meg.add
// CHECK: %[[COUNT:.*]] = meg.label_count %arg1 ignore -100 global
// CHECK: meg.div %[[SUM]], %[[COUNT]]
module {
  meg.param @head : tensor<64x32xf32> init #meg.init<normal(0.02)>
  func.func @loss(%h: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
    %head = meg.param_ref @head : tensor<64x32xf32>
    %logits = meg.linear %h, %head : tensor<2x8x32xf32>, tensor<64x32xf32>
    %s = meg.cross_entropy %logits, %labels sum ignore -100 : tensor<2x8x64xf32>, tensor<2x8xi32>
    %n = meg.label_count %labels ignore -100 global : tensor<2x8xi32>
    %l = meg.div %s, %n : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }
}
// -----

// Logits read by something else than the loss are left alone.
// CHECK-LABEL: func.func @loss
// CHECK: meg.cross_entropy %{{.*}}, %{{.*}} mean
// CHECK-NOT: meg.loss_chunk
module {
  meg.param @head : tensor<64x32xf32> init #meg.init<normal(0.02)>
  func.func @loss(%h: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x64xf32>) {
    %head = meg.param_ref @head : tensor<64x32xf32>
    %logits = meg.linear %h, %head : tensor<2x8x32xf32>, tensor<64x32xf32>
    %l = meg.cross_entropy %logits, %labels mean : tensor<2x8x64xf32>, tensor<2x8xi32>
    return %l, %logits : tensor<f32>, tensor<2x8x64xf32>
  }
}

// -----

module {
  meg.param @head : tensor<64x32xf32> init #meg.init<normal(0.02)>
  func.func @loss(%h: tensor<1x7x32xf32>, %labels: tensor<1x7xi32>) -> tensor<f32> {
    %head = meg.param_ref @head : tensor<64x32xf32>
    %logits = meg.linear %h, %head : tensor<1x7x32xf32>, tensor<64x32xf32>
    // expected-error @+1 {{meg-chunk-loss: 2 chunks do not divide the 7 tokens of the loss; choose a divisor}}
    %l = meg.cross_entropy %logits, %labels mean : tensor<1x7x64xf32>, tensor<1x7xi32>
    return %l : tensor<f32>
  }
}

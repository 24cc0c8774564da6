// RUN: megc-opt %s --meg-pipeline-split | FileCheck %s

// Two stages of one forward (the ops record their stage, as
// meg-pipeline-stages leaves them): rank 0 computes its layer and sends
// the result on, waiting for the send once its passes are done; rank 1
// receives it before its layer. The scaling reads no staged value but
// stage 1's, so runs there; the constant is computed where it is needed.
// Each result is all-reduced over pp: the output from stage 1 with zeros
// from rank 0, the sum of both stages' values as each rank's own term.
// CHECK: meg.submesh @world[pp]
// CHECK-LABEL: func.func @forward_pp0(
// CHECK-SAME: attributes {meg.entry_name = "forward", meg.pipeline_rank = 0 : i64}
// CHECK-NEXT: %[[W0:.*]] = meg.param_ref @w0
// CHECK-NEXT: %[[H0:.*]] = meg.linear %arg0, %[[W0]]
// CHECK-NEXT: %[[SEND:.*]] = meg.send_start %[[H0]] over @world[pp] to 1
// CHECK-NEXT: meg.wait %[[SEND]]
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00>
// CHECK-NEXT: %[[Y:.*]] = meg.all_reduce %[[ZERO]] over @world[pp] sum
// CHECK-NEXT: %[[SUM:.*]] = meg.all_reduce %[[H0]] over @world[pp] sum
// CHECK-NEXT: return %[[Y]], %[[SUM]]
// CHECK-LABEL: func.func @forward_pp1(
// CHECK-SAME: meg.pipeline_rank = 1 : i64
// CHECK-NEXT: %[[RECV:.*]] = meg.recv_start over @world[pp] from 0
// CHECK-NEXT: %[[IN:.*]] = meg.wait %[[RECV]]
// CHECK-NEXT: %[[W1:.*]] = meg.param_ref @w1
// CHECK-NEXT: %[[H1:.*]] = meg.linear %[[IN]], %[[W1]]
// CHECK-NEXT: %[[TWO:.*]] = arith.constant dense<2.000000e+00>
// CHECK-NEXT: %[[SCALED:.*]] = meg.mul %[[H1]], %[[TWO]]
// CHECK-NEXT: %[[Y1:.*]] = meg.all_reduce %[[SCALED]] over @world[pp] sum
// CHECK-NEXT: %[[SUM1:.*]] = meg.all_reduce %[[H1]] over @world[pp] sum
// CHECK-NEXT: return %[[Y1]], %[[SUM1]]
// CHECK-NOT: func.func @forward(
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64, meg.stages = array<i64: 0>}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64, meg.stages = array<i64: 1>}
  func.func @forward(%x: tensor<2x4x8xf32> {meg.name = "x"}) -> (tensor<2x4x8xf32> {meg.name = "y"}, tensor<2x4x8xf32> {meg.name = "sum"}) {
    %c = arith.constant dense<2.0> : tensor<2x4x8xf32>
    %w0 = meg.param_ref @w0 {meg.stage = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %x, %w0 {meg.stage = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.stage = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.stage = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %y = meg.mul %h1, %c : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %s = meg.add %h0, %h1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    return %y, %s : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
}

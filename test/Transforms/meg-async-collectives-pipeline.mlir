// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-async-collectives))' | FileCheck %s
// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-async-collectives{early-transfers=false}))' | FileCheck %s --check-prefix=LATE

// A pipeline rank's last backward pass: the input gradient it sends needs
// only the product through the weight, so the pass's weight gradient, its
// update and the stores move after the send (in their order), and the
// loss's sum starts right after the send, above the wait for an earlier
// transfer and the stores; it is waited for before the return.
// CHECK-LABEL: func.func @last_stage
// CHECK: %[[R:.*]] = meg.wait %{{.*}} : !meg.future<tensor<4x8xf32>>
// CHECK-NEXT: %[[DX:.*]] = meg.matmul %arg1, %arg2 {meg.pipeline_pass = "backward.mb0"}
// CHECK-NEXT: %[[S:.*]] = meg.send_start %[[DX]] over @world[pp] to 0
// CHECK-NEXT: %[[L:.*]] = meg.all_reduce_start %arg3 over @world[pp] sum
// CHECK-NEXT: %[[DW:.*]] = meg.matmul %arg1, %[[R]] transpose_lhs {meg.pipeline_pass = "backward.mb0"}
// CHECK-NEXT: meg.param_ref @w
// CHECK-NEXT: %[[NEW:.*]] = meg.sub
// CHECK-NEXT: meg.param_store @w, %[[NEW]]
// CHECK-NEXT: meg.wait %[[S]]
// CHECK-NEXT: meg.wait %[[L]]
// CHECK-NEXT: return

// Without early transfers the pass sends after all its work; the sum still
// starts after the send.
// LATE-LABEL: func.func @last_stage
// LATE: meg.matmul %arg1, %arg2
// LATE-NEXT: meg.matmul %arg1, %{{.*}} transpose_lhs
// LATE-NEXT: meg.param_ref @w
// LATE-NEXT: meg.sub
// LATE-NEXT: meg.param_store @w
// LATE-NEXT: meg.send_start
// LATE-NEXT: meg.all_reduce_start %arg3
meg.mesh @world [pp = 2]
meg.submesh @world[pp]
meg.param @w : tensor<8x8xf32> init #meg.init<zeros>
func.func @last_stage(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %wt: tensor<8x8xf32>, %loss: tensor<f32>) -> tensor<f32> attributes {meg.pipeline_rank = 1 : i64} {
  %rf = meg.recv_start over @world[pp] from 0 : !meg.future<tensor<4x8xf32>>
  %r = meg.wait %rf : !meg.future<tensor<4x8xf32>>
  %dx = meg.matmul %dy, %wt {meg.pipeline_pass = "backward.mb0"} : tensor<4x8xf32>, tensor<8x8xf32>
  %dw = meg.matmul %dy, %r transpose_lhs {meg.pipeline_pass = "backward.mb0"} : tensor<4x8xf32>, tensor<4x8xf32>
  %w = meg.param_ref @w : tensor<8x8xf32>
  %new = meg.sub %w, %dw {meg.pipeline_pass = "backward.mb0"} : tensor<8x8xf32>, tensor<8x8xf32>
  meg.param_store @w, %new {meg.pipeline_pass = "backward.mb0"} : tensor<8x8xf32>
  %sf = meg.send_start %dx over @world[pp] to 0 : tensor<4x8xf32> -> !meg.future<tensor<4x8xf32>>
  %sent = meg.wait %sf : !meg.future<tensor<4x8xf32>>
  %sum = meg.all_reduce %loss over @world[pp] sum : tensor<f32>
  return %sum : tensor<f32>
}

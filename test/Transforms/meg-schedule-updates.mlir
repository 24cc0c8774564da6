// RUN: megc-opt %s --split-input-file --meg-schedule-updates | FileCheck %s

// Each update moves right after its gradient and the last read of what it
// overwrites (the master weights are read by nothing else, the bf16
// weights by the products through them), with what only it needs: w1's
// update and rounding right after w1's gradient, then w2's gradient
// product, update and rounding. The reads of the state and the step count
// go right before their first user; the stores stay last.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H:.*]] = meg.linear %arg0
// CHECK: %[[DX:.*]] = meg.matmul %[[DY:.*]], %[[W2:.*]] :
// CHECK-NEXT: %[[G1:.*]] = meg.matmul %[[DX]], %arg0 transpose_lhs
// CHECK: meg.param_ref @optimizer.step
// CHECK: %[[P1:.*]], %{{.*}}, %{{.*}} = meg.adamw %{{.*}}, %[[G1]],
// CHECK-NEXT: %[[R1:.*]] = meg.cast %[[P1]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[G2:.*]] = meg.matmul %[[DY]], %[[H]] transpose_lhs
// CHECK: %[[P2:.*]], %{{.*}}, %{{.*}} = meg.adamw %{{.*}}, %[[G2]],
// CHECK-NEXT: %[[R2:.*]] = meg.cast %[[P2]]
// CHECK-NEXT: meg.param_store @optimizer.step
// CHECK: meg.param_store @w1, %[[R1]]
// CHECK: meg.param_store @w2, %[[R2]]
// CHECK: return
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  meg.param @w1 : tensor<8x8xbf16> init #meg.init<normal(0.02)>
  meg.param @w2 : tensor<8x8xbf16> init #meg.init<normal(0.02)>
  meg.param state @optimizer.step : tensor<f32> init #meg.init<zeros> {meg.non_negative}
  meg.param state @optimizer.exp_avg.w1 : tensor<8x8xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg_sq.w1 : tensor<8x8xf32> init #meg.init<zeros> {meg.non_negative}
  meg.param state @optimizer.main_param.w1 : tensor<8x8xf32> init #meg.init<copy(@w1)>
  meg.param state @optimizer.exp_avg.w2 : tensor<8x8xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg_sq.w2 : tensor<8x8xf32> init #meg.init<zeros> {meg.non_negative}
  meg.param state @optimizer.main_param.w2 : tensor<8x8xf32> init #meg.init<copy(@w2)>
  func.func @train_step(%arg0: tensor<4x8xbf16>) -> (tensor<f32> {meg.name = "loss"}) {
    %cst = arith.constant dense<3.125000e-02> : tensor<f32>
    %cst_0 = arith.constant dense<1.000000e+00> : tensor<f32>
    %0 = meg.param_ref @w1 : tensor<8x8xbf16>
    %1 = meg.param_ref @w2 : tensor<8x8xbf16>
    %2 = meg.linear %arg0, %0 : tensor<4x8xbf16>, tensor<8x8xbf16>
    %3 = meg.linear %2, %1 : tensor<4x8xbf16>, tensor<8x8xbf16>
    %4 = meg.cast %3 : tensor<4x8xbf16> to tensor<4x8xf32>
    %5 = meg.reduce mean %4 dims [0, 1] : tensor<4x8xf32>
    %6 = meg.reshape %cst_0 : tensor<f32> to tensor<1x1xf32>
    %7 = meg.mul %6, %cst : tensor<1x1xf32>, tensor<f32>
    %8 = meg.broadcast %7 : tensor<1x1xf32> to tensor<4x8xf32>
    %9 = meg.cast %8 : tensor<4x8xf32> to tensor<4x8xbf16>
    %10 = meg.matmul %9, %1 : tensor<4x8xbf16>, tensor<8x8xbf16>
    %11 = meg.matmul %9, %2 transpose_lhs : tensor<4x8xbf16>, tensor<4x8xbf16>
    %12 = meg.matmul %10, %arg0 transpose_lhs : tensor<4x8xbf16>, tensor<4x8xbf16>
    %13 = meg.param_ref @optimizer.step : tensor<f32>
    %14 = meg.add %13, %cst_0 : tensor<f32>, tensor<f32>
    %15 = meg.cast %14 : tensor<f32> to tensor<i64>
    %16 = meg.param_ref @optimizer.exp_avg_sq.w1 : tensor<8x8xf32>
    %17 = meg.param_ref @optimizer.exp_avg.w1 : tensor<8x8xf32>
    %18 = meg.param_ref @optimizer.main_param.w1 : tensor<8x8xf32>
    %new_param, %new_exp_avg, %new_exp_avg_sq = meg.adamw %18, %12, %17, %16, %15 config(#meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>) : tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<i64>
    %19 = meg.cast %new_param : tensor<8x8xf32> to tensor<8x8xbf16>
    %20 = meg.param_ref @optimizer.exp_avg_sq.w2 : tensor<8x8xf32>
    %21 = meg.param_ref @optimizer.exp_avg.w2 : tensor<8x8xf32>
    %22 = meg.param_ref @optimizer.main_param.w2 : tensor<8x8xf32>
    %new_param_1, %new_exp_avg_2, %new_exp_avg_sq_3 = meg.adamw %22, %11, %21, %20, %15 config(#meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>) : tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<i64>
    %23 = meg.cast %new_param_1 : tensor<8x8xf32> to tensor<8x8xbf16>
    meg.param_store @optimizer.step, %14 : tensor<f32>
    meg.param_store @optimizer.main_param.w1, %new_param : tensor<8x8xf32>
    meg.param_store @w1, %19 : tensor<8x8xbf16>
    meg.param_store @optimizer.exp_avg.w1, %new_exp_avg : tensor<8x8xf32>
    meg.param_store @optimizer.exp_avg_sq.w1, %new_exp_avg_sq : tensor<8x8xf32>
    meg.param_store @optimizer.main_param.w2, %new_param_1 : tensor<8x8xf32>
    meg.param_store @w2, %23 : tensor<8x8xbf16>
    meg.param_store @optimizer.exp_avg.w2, %new_exp_avg_2 : tensor<8x8xf32>
    meg.param_store @optimizer.exp_avg_sq.w2, %new_exp_avg_sq_3 : tensor<8x8xf32>
    return %5 : tensor<f32>
  }
}


// -----

// With clipping every update reads the norm of all gradients: they stay
// after the norm.
// CHECK-LABEL: func.func @clipped
// CHECK: %[[G1:.*]] = meg.mul %arg0
// CHECK: %[[G2:.*]] = meg.mul %arg1
// CHECK: %[[SCALE:.*]] = meg.rsqrt
// CHECK-DAG: meg.adamw %{{.*}}, %[[G1]], {{.*}} grad_scale(%[[SCALE]]
// CHECK-DAG: meg.adamw %{{.*}}, %[[G2]], {{.*}} grad_scale(%[[SCALE]]
// CHECK: meg.param_store @a
module {
  meg.param @a : tensor<4xf32> init #meg.init<zeros>
  meg.param @b : tensor<4xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg.a : tensor<4xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg.b : tensor<4xf32> init #meg.init<zeros>
  func.func @clipped(%x: tensor<4xf32>, %y: tensor<4xf32>, %t: tensor<i64>) {
    %g1 = meg.mul %x, %x : tensor<4xf32>, tensor<4xf32>
    %s1 = meg.reduce sum %g1 dims [0] : tensor<4xf32>
    %g2 = meg.mul %y, %y : tensor<4xf32>, tensor<4xf32>
    %s2 = meg.reduce sum %g2 dims [0] : tensor<4xf32>
    %s = meg.add %s1, %s2 : tensor<f32>, tensor<f32>
    %scale = meg.rsqrt %s : tensor<f32>
    %a = meg.param_ref @a : tensor<4xf32>
    %ma = meg.param_ref @optimizer.exp_avg.a : tensor<4xf32>
    %a2:3 = meg.adamw %a, %g1, %ma, %ma, %t grad_scale(%scale : tensor<f32>) config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
    %b = meg.param_ref @b : tensor<4xf32>
    %mb = meg.param_ref @optimizer.exp_avg.b : tensor<4xf32>
    %b2:3 = meg.adamw %b, %g2, %mb, %mb, %t grad_scale(%scale : tensor<f32>) config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
    meg.param_store @a, %a2#0 : tensor<4xf32>
    meg.param_store @optimizer.exp_avg.a, %a2#1 : tensor<4xf32>
    meg.param_store @b, %b2#0 : tensor<4xf32>
    meg.param_store @optimizer.exp_avg.b, %b2#1 : tensor<4xf32>
    return
  }
}

// -----

// A pipeline rank's program: an update moves up to its gradient but not
// above a send (the neighbour waits for it), and the weight-gradient pass
// of a zero-bubble schedule keeps its ops (the schedule delays it to fill
// the bubble) although their inputs exist earlier.
// CHECK-LABEL: func.func @pipelined
// CHECK: %[[DX:.*]] = meg.matmul %arg1, %arg2 {meg.pipeline_pass = "backward.mb0"}
// CHECK-NEXT: %[[G:.*]] = meg.mul %[[DX]], %[[DX]] {meg.pipeline_pass = "backward.mb0"}
// CHECK-NEXT: meg.send_start %[[DX]]
// CHECK: meg.adamw %{{.*}}, %[[G]],
// CHECK: meg.add %arg0, %arg0 {meg.pipeline_pass = "forward.mb1"}
// CHECK-NEXT: %[[DW:.*]] = meg.matmul %[[DX]], %arg0 transpose_lhs {meg.pipeline_pass = "weight.mb0"}
// CHECK: meg.adamw %{{.*}}, %[[DW]],
// CHECK: meg.wait
module {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  meg.param @a : tensor<8x8xf32> init #meg.init<zeros>
  meg.param @b : tensor<4x8xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg.a : tensor<8x8xf32> init #meg.init<zeros>
  meg.param state @optimizer.exp_avg.b : tensor<4x8xf32> init #meg.init<zeros>
  func.func @pipelined(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %wt: tensor<8x8xf32>, %t: tensor<i64>) -> tensor<4x8xf32> attributes {meg.pipeline_rank = 1 : i64} {
    %dx = meg.matmul %dy, %wt {meg.pipeline_pass = "backward.mb0"} : tensor<4x8xf32>, tensor<8x8xf32>
    %g = meg.mul %dx, %dx {meg.pipeline_pass = "backward.mb0"} : tensor<4x8xf32>, tensor<4x8xf32>
    %sf = meg.send_start %dx over @world[pp] to 0 : tensor<4x8xf32> -> !meg.future<tensor<4x8xf32>>
    %h = meg.add %x, %x {meg.pipeline_pass = "forward.mb1"} : tensor<4x8xf32>, tensor<4x8xf32>
    %dw = meg.matmul %dx, %x transpose_lhs {meg.pipeline_pass = "weight.mb0"} : tensor<4x8xf32>, tensor<4x8xf32>
    %b = meg.param_ref @b : tensor<4x8xf32>
    %mb = meg.param_ref @optimizer.exp_avg.b : tensor<4x8xf32>
    %b2:3 = meg.adamw %b, %g, %mb, %mb, %t config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) {meg.pipeline_pass = "backward.mb0"} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>
    %a = meg.param_ref @a : tensor<8x8xf32>
    %ma = meg.param_ref @optimizer.exp_avg.a : tensor<8x8xf32>
    %a2:3 = meg.adamw %a, %dw, %ma, %ma, %t config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) {meg.pipeline_pass = "weight.mb0"} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<i64>
    %sent = meg.wait %sf : !meg.future<tensor<4x8xf32>>
    meg.param_store @a, %a2#0 : tensor<8x8xf32>
    meg.param_store @optimizer.exp_avg.a, %a2#1 : tensor<8x8xf32>
    meg.param_store @b, %b2#0 : tensor<4x8xf32>
    meg.param_store @optimizer.exp_avg.b, %b2#1 : tensor<4x8xf32>
    return %h : tensor<4x8xf32>
  }
}

// RUN: megc-opt %s --split-input-file --meg-autodiff --meg-precision --meg-optimizer --verify-diagnostics | FileCheck %s

// main_grads = bf16 for f32 parameters: each gradient is cast once, where
// the dtype changes, and the moments are stored as the policy says.
// CHECK-DAG: meg.param state @optimizer.exp_avg.w : tensor<4x4xbf16>
// CHECK-DAG: meg.param state @optimizer.exp_avg_sq.w : tensor<4x4xf32>
// CHECK-LABEL: func.func @grad
// CHECK-SAME: tensor<4x4xbf16> {meg.name = "grad.w"}
// CHECK: %[[G:.*]] = meg.cast %{{.*}} : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK-NOT: meg.cast
// CHECK: return %{{.*}}, %[[G]]
// CHECK-LABEL: func.func @train_step
// CHECK: meg.adamw {{.*}} : tensor<4x4xf32>, tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4x4xf32>, tensor<i64>
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = f32, main_params = f32, main_grads = bf16, grad_reduce = f32, exp_avg = bf16, exp_avg_sq = f32>} {
  meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4x4xf32>
    %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// A gradient that already has the main_grads dtype is not cast.
// CHECK-LABEL: func.func @grad
// CHECK-NOT: meg.cast
// CHECK: return
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = f32, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xf32>
    %l = meg.reduce sum %w dims [0] : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  // expected-error @+1 {{meg-precision: the policy keeps main parameters in 'f32' but parameter @w is 'bf16'; separate master weights are not supported yet}}
  meg.param @w : tensor<4xbf16> init #meg.init<ones>
  func.func @loss(%x: tensor<4xbf16>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xbf16>
    %s = meg.reduce sum %w dims [0] : tensor<4xbf16>
    %l = meg.cast %s : tensor<bf16> to tensor<f32>
    return %l : tensor<f32>
  }
}

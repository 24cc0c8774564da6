// RUN: megc-opt %s --split-input-file --meg-autodiff --meg-precision --meg-optimizer --verify-diagnostics | FileCheck %s

// main_grads = bf16 for f32 parameters: each gradient is cast once, where
// the dtype changes, and the moments are stored as the policy says.
// CHECK-DAG: meg.param state @optimizer.exp_avg.w : tensor<4x4xbf16>
// CHECK-DAG: meg.param state @optimizer.exp_avg_sq.w : tensor<4x4xf32>
// CHECK-LABEL: func.func @grad
// CHECK-SAME: tensor<4x4xbf16> {meg.grad_of = @w, meg.name = "grad.w"}
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

// bf16 weights with f32 master weights, main grads and moments: the update
// runs on the f32 copy (initialised from the weight) and the weight stores
// its rounding; the bf16 gradient is cast once for the optimizer.
// CHECK-DAG: meg.param @w : tensor<4xbf16>
// CHECK-DAG: meg.param state @optimizer.main_param.w : tensor<4xf32> init #meg.init<copy(@w)>
// CHECK-LABEL: func.func @grad
// CHECK: %[[G:.*]] = meg.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK: return %{{.*}}, %[[G]]
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.*]] = meg.param_ref @optimizer.main_param.w : tensor<4xf32>
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}} = meg.adamw %[[M]], {{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
// CHECK: %[[R:.*]] = meg.cast %[[P]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-DAG: meg.param_store @optimizer.main_param.w, %[[P]] : tensor<4xf32>
// CHECK-DAG: meg.param_store @w, %[[R]] : tensor<4xbf16>
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  meg.param @w : tensor<4xbf16> init #meg.init<ones>
  func.func @loss(%x: tensor<4xbf16>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xbf16>
    %p = meg.mul %w, %x : tensor<4xbf16>, tensor<4xbf16>
    %s = meg.reduce sum %p dims [0] : tensor<4xbf16>
    %l = meg.cast %s : tensor<bf16> to tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// bf16 moments and a bf16 gradient reduction dtype with f32 weights: no
// gradient cast (main_grads is the compute dtype), the moments are stored
// in bf16. (grad_reduce takes effect where gradients are reduced across
// ranks, which meg-fsdp inserts.)
// CHECK-DAG: meg.param state @optimizer.exp_avg.w : tensor<4xbf16>
// CHECK-DAG: meg.param state @optimizer.exp_avg_sq.w : tensor<4xbf16>
// CHECK-LABEL: func.func @grad
// CHECK-NOT: meg.cast
// CHECK-LABEL: func.func @train_step
// CHECK: meg.adamw {{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<i64>
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = f32, main_params = f32, main_grads = f32, grad_reduce = bf16, exp_avg = bf16, exp_avg_sq = bf16>} {
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xf32>
    %p = meg.mul %w, %x : tensor<4xf32>, tensor<4xf32>
    %l = meg.reduce sum %p dims [0] : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// Master weights narrower than the weights cannot hold them.
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = f32, main_params = f16, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  // expected-error @+1 {{meg-precision: the policy keeps main parameters in 'f16', which cannot hold parameter @w ('f32') exactly; use the parameter's dtype or f32}}
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xf32>
    %l = meg.reduce sum %w dims [0] : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// bf16 weights, f32 main grads and grad_reduce on tp = 2: the gradient of a
// norm weight every tp rank applies to its own part (the copy to the group
// in the loss) is summed over tp in grad_reduce, f32, not in bf16.
// CHECK-LABEL: func.func @grad
// CHECK: %{{.*}}, %[[PART:.*]] = meg.rms_norm_grad
// CHECK-NOT: meg.all_reduce {{.*}} : tensor<4xbf16>
// CHECK: %[[WIDE:.*]] = meg.cast %[[PART]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[SUM:.*]] = meg.all_reduce %[[WIDE]] over @world[tp] sum : tensor<4xf32>
// CHECK-NOT: meg.cast
// CHECK: return %{{.*}}, %[[SUM]]
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  meg.mesh @world [tp = 2]
  meg.submesh @world[tp]
  meg.param @w : tensor<4xbf16> init #meg.init<ones>
  func.func @loss(%x: tensor<2x4xbf16>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xbf16>
    %c = meg.copy_to_group %w over @world[tp] : tensor<4xbf16>
    %y = meg.rms_norm %x, %c eps 1.0e-05 : tensor<2x4xbf16>, tensor<4xbf16>
    %y32 = meg.cast %y : tensor<2x4xbf16> to tensor<2x4xf32>
    %l = meg.reduce sum %y32 dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// grad_reduce = bf16: the sum over tp stays in the gradient's dtype and
// main_grads casts after it.
// CHECK-LABEL: func.func @grad
// CHECK: %[[SUM:.*]] = meg.all_reduce %{{.*}} over @world[tp] sum : tensor<4xbf16>
// CHECK-NEXT: %[[G:.*]] = meg.cast %[[SUM]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: return %{{.*}}, %[[G]]
module attributes {
  meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>,
  meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = bf16, exp_avg = f32, exp_avg_sq = f32>} {
  meg.mesh @world [tp = 2]
  meg.submesh @world[tp]
  meg.param @w : tensor<4xbf16> init #meg.init<ones>
  func.func @loss(%x: tensor<2x4xbf16>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xbf16>
    %c = meg.copy_to_group %w over @world[tp] : tensor<4xbf16>
    %y = meg.rms_norm %x, %c eps 1.0e-05 : tensor<2x4xbf16>, tensor<4xbf16>
    %y32 = meg.cast %y : tensor<2x4xbf16> to tensor<2x4xf32>
    %l = meg.reduce sum %y32 dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// RUN: megc-opt %s --split-input-file --meg-autodiff --meg-optimizer --verify-diagnostics | FileCheck %s

// train_step updates each trainable parameter with AdamW and keeps the
// moments and the step count as state parameters. A NaN or infinite loss
// skips every update (the count of non-finite values is AdamW's skip) and
// the step count stays: it advances by 1 + max(-nonfinite, -1).
// CHECK-DAG: meg.param state @optimizer.step : tensor<f32> init #meg.init<zeros>
// CHECK-DAG: meg.param state @optimizer.exp_avg.w : tensor<4x4xf32> init #meg.init<zeros> {meg.state_of = #meg.state_of<exp_avg of @w>}
// CHECK-DAG: meg.param state @optimizer.exp_avg_sq.w : tensor<4x4xf32> init #meg.init<zeros> {meg.non_negative, meg.state_of = #meg.state_of<exp_avg_sq of @w>}
// CHECK-NOT: optimizer.exp_avg.frozen
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {meg.name = "loss"}, tensor<f32> {meg.name = "nonfinite"})
// CHECK: %[[STEP:.*]] = meg.param_ref @optimizer.step
// CHECK: %[[COUNT:.*]] = meg.add %[[STEP]]
// CHECK: %[[T:.*]] = meg.cast %[[COUNT]] : tensor<f32> to tensor<i64>
// CHECK: %[[BAD:.*]] = meg.count_nonfinite %[[LOSS:.*]] : tensor<f32>
// CHECK: %[[P:.*]], %[[M:.*]], %[[V:.*]] = meg.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[T]] skip(%[[BAD]] : tensor<f32>) config(#meg.adamw<lr = 0.01
// CHECK: %[[MINUS:.*]] = arith.constant dense<-1.000000e+00>
// CHECK: %[[NEGBAD:.*]] = meg.neg %[[BAD]]
// CHECK: %[[ADVANCE:.*]] = meg.max %[[NEGBAD]], %[[MINUS]]
// CHECK: %[[NEXT:.*]] = meg.add %[[COUNT]], %[[ADVANCE]]
// CHECK: meg.param_store @optimizer.step, %[[NEXT]]
// CHECK: meg.param_store @w, %[[P]]
// CHECK: meg.param_store @optimizer.exp_avg.w, %[[M]]
// CHECK: meg.param_store @optimizer.exp_avg_sq.w, %[[V]]
// CHECK-NEXT: return %[[LOSS]], %[[BAD]]
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  meg.param frozen @frozen : tensor<4xf32> init #meg.init<ones>
  func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4x4xf32>
    %f = meg.param_ref @frozen : tensor<4xf32>
    %y = meg.linear %x, %w bias %f : tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error @+1 {{meg-optimizer: the module has no 'meg.optimizer' attribute}}
module {
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4xf32>
    %l = meg.reduce sum %w dims [0] : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// With a schedule, AdamW reads the rate from a state scalar the runtime
// writes, recorded on the schedule with the step count; with clip_grad the
// gradients are scaled by min(1, clip / (norm + 1e-6)) inside the update
// and the step returns the norm (before clipping) as grad_norm, whose
// finiteness the step checks too.
// CHECK: meg.lr_schedule = #meg.lr_schedule<kind = cosine, warmup = 2, decay = 10, min_lr = 0.001, init_lr = 0.0, wsd_decay = 0, wsd_style = linear, lr_param = @optimizer.lr, step_param = @optimizer.step>
// CHECK-DAG: meg.param state @optimizer.lr : tensor<f32> init #meg.init<zeros>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {meg.name = "loss"}, tensor<f32> {meg.name = "grad_norm"}, tensor<f32> {meg.name = "nonfinite"})
// CHECK: %[[LR:.*]] = meg.param_ref @optimizer.lr
// CHECK: %[[SQ:.*]] = meg.mul %[[G:.*]], %[[G]] : tensor<4x4xf32>
// CHECK: %[[SUM:.*]] = meg.reduce sum %[[SQ]] dims [0, 1]
// CHECK: %[[NORM:.*]] = meg.sqrt %[[SUM]]
// CHECK: %[[EPS:.*]] = meg.add %[[NORM]]
// CHECK: %[[COEFF:.*]] = meg.div %{{.*}}, %[[EPS]]
// CHECK: %[[NEG:.*]] = meg.neg %[[COEFF]]
// CHECK: %[[MAX:.*]] = meg.max %[[NEG]]
// CHECK: %[[SCALE:.*]] = meg.neg %[[MAX]]
// CHECK: %[[BAD:.*]] = meg.count_nonfinite %{{.*}}, %[[NORM]] : tensor<f32>, tensor<f32>
// CHECK: meg.adamw {{.*}} lr(%[[LR]] : tensor<f32>) grad_scale(%[[SCALE]] : tensor<f32>) skip(%[[BAD]] : tensor<f32>) config(#meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, clip_grad = 1.0>)
// CHECK: return %{{.*}}, %[[NORM]], %[[BAD]]
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, clip_grad = 1.0>, meg.lr_schedule = #meg.lr_schedule<kind = cosine, warmup = 2, decay = 10, min_lr = 1.0e-3, init_lr = 0.0, wsd_decay = 0, wsd_style = linear>} {
  meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4x4xf32>
    %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// Two micro-batches: train_step takes twice the rows, runs the gradient on
// each half and steps on the means.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>)
// CHECK: meg.slice %[[X]] [0, 0] [2, 4] [1, 1]
// CHECK: meg.slice %[[X]] [2, 0] [2, 4] [1, 1]
// CHECK: %[[LOSS:.*]] = meg.add
// CHECK: %[[GRAD:.*]] = meg.add
// CHECK: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: meg.mul %[[LOSS]], %[[HALF]]
// CHECK: %[[HALF2:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[MEAN:.*]] = meg.mul %[[GRAD]], %[[HALF2]]
// CHECK: meg.adamw %{{.*}}, %[[MEAN]]
module attributes {meg.micro_batches = 2 : i64, meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4x4xf32>
    %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// A loss that ignores padding, over 2 micro-batches: each micro-batch's
// global label count becomes the step's count over 2, so that the mean of
// the two losses is the step's sum over its count.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<4x8xi32>
// CHECK: %[[ALL:.*]] = meg.label_count %[[LABELS]] ignore -100 global : tensor<4x8xi32>
// CHECK: %[[COUNT:.*]] = meg.div %[[ALL]], %{{.*}} : tensor<f32>
// CHECK-NOT: meg.label_count
// CHECK: %[[SUM0:.*]] = meg.cross_entropy %{{.*}} sum ignore -100
// CHECK: meg.div %[[SUM0]], %[[COUNT]]
// CHECK: meg.cross_entropy_grad %{{.*}} sum ignore -100
// CHECK: %[[SUM1:.*]] = meg.cross_entropy %{{.*}} sum ignore -100
// CHECK: meg.div %[[SUM1]], %[[COUNT]]
module attributes {meg.micro_batches = 2 : i64, meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  meg.param @w : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x8x4xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<16x4xf32>
    %y = meg.linear %x, %w : tensor<2x8x4xf32>, tensor<16x4xf32>
    %s = meg.cross_entropy %y, %labels sum ignore -100 : tensor<2x8x16xf32>, tensor<2x8xi32>
    %n = meg.label_count %labels ignore -100 global : tensor<2x8xi32>
    %l = meg.div %s, %n : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The count must be of an entry input, whose rows the micro-batches split.
module attributes {meg.micro_batches = 2 : i64, meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  meg.param @w : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x8x4xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<16x4xf32>
    %y = meg.linear %x, %w : tensor<2x8x4xf32>, tensor<16x4xf32>
    %s = meg.cross_entropy %y, %labels sum ignore -100 : tensor<2x8x16xf32>, tensor<2x8xi32>
    %flat = meg.reshape %labels : tensor<2x8xi32> to tensor<16xi32>
    // expected-error @+1 {{meg-optimizer: micro-batches need a global label count of an entry input}}
    %n = meg.label_count %flat ignore -100 global : tensor<16xi32>
    %l = meg.div %s, %n : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A routing-bias update happens in train_step alone: over 2 micro-batches
// the two loads are summed, taken over the data-parallel ranks
// (meg.data_sum), and the bias moves by rate x sign(sum(L) - E L) (the sign
// by clamping a whole number to [-1, 1]), times 0 when the step is
// skipped; loss and grad drop it and the load they computed for it.
// CHECK-LABEL: func.func @loss
// CHECK-NOT: meg.expert_bias_update
// CHECK-NOT: meg.cast
// CHECK-LABEL: func.func @grad
// CHECK-NOT: meg.expert_bias_update
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: meg.expert_bias_update
// CHECK: %[[L0:.*]] = meg.cast %{{.*}} : tensor<4xi32> to tensor<4xf32>
// CHECK: %[[L1:.*]] = meg.cast %{{.*}} : tensor<4xi32> to tensor<4xf32>
// CHECK: %[[NONFINITE:.*]] = meg.count_nonfinite
// CHECK: %[[SKIPPED:.*]] = meg.max %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>
// CHECK: %[[KEEP:.*]] = meg.add %[[SKIPPED]], %{{.*}} : tensor<f32>, tensor<f32>
// CHECK: %[[BOTH:.*]] = meg.add %[[L0]], %[[L1]] : tensor<4xf32>, tensor<4xf32>
// CHECK: %[[TOTAL:.*]] = meg.data_sum %[[BOTH]] : tensor<4xf32>
// CHECK: %[[SUM:.*]] = meg.reduce sum %[[TOTAL]] dims [0] : tensor<4xf32>
// CHECK: %[[EL:.*]] = meg.mul %[[TOTAL]], %{{.*}} : tensor<4xf32>, tensor<f32>
// CHECK: %[[OFFSET:.*]] = meg.sub %[[SUM]], %[[EL]] : tensor<f32>, tensor<4xf32>
// CHECK: %[[N1:.*]] = meg.neg %[[OFFSET]] : tensor<4xf32>
// CHECK: %[[M1:.*]] = meg.max %[[N1]], %[[MINUS:.*]] : tensor<4xf32>, tensor<f32>
// CHECK: %[[UP:.*]] = meg.neg %[[M1]] : tensor<4xf32>
// CHECK: %[[SIGN:.*]] = meg.max %[[UP]], %[[MINUS]] : tensor<4xf32>, tensor<f32>
// CHECK: %[[RATE:.*]] = meg.mul %{{.*}}, %[[KEEP]] : tensor<f32>, tensor<f32>
// CHECK: %[[BIAS:.*]] = meg.param_ref @bias : tensor<4xf32>
// CHECK: %[[MOVE:.*]] = meg.mul %[[SIGN]], %[[RATE]] : tensor<4xf32>, tensor<f32>
// CHECK: %[[NEW:.*]] = meg.add %[[BIAS]], %[[MOVE]] : tensor<4xf32>, tensor<4xf32>
// CHECK: meg.param_store @bias, %[[NEW]] : tensor<4xf32>
module attributes {meg.micro_batches = 2 : i64, meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  meg.param frozen @bias : tensor<4xf32> init #meg.init<zeros>
  func.func @loss(%x: tensor<3x4xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<4x4xf32>
    %b = meg.param_ref @bias : tensor<4xf32>
    %s = meg.linear %x, %w : tensor<3x4xf32>, tensor<4x4xf32>
    %p = meg.sigmoid %s : tensor<3x4xf32>
    %e, %g = meg.moe_route %p, %b top_k 1 groups 1 top_groups 1 scaling 1.0 : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x1xi32>, tensor<3x1xf32>
    %t, %c, %pos, %load, %d = meg.moe_assign %e, %g experts 4 capacity 3 policy probs : tensor<3x1xi32>, tensor<3x1xf32> -> tensor<4x3xi32>, tensor<4x3xi32>, tensor<3x1xi32>, tensor<4xi32>, tensor<i32>
    %lf = meg.cast %load : tensor<4xi32> to tensor<4xf32>
    meg.expert_bias_update @bias, %lf rate 1.0e-3 : tensor<4xf32>
    %l = meg.reduce mean %g dims [0, 1] : tensor<3x1xf32>
    return %l : tensor<f32>
  }
}

// RUN: megc-opt %s --split-input-file --meg-autodiff --meg-optimizer --meg-fsdp --canonicalize --cse --verify-diagnostics | FileCheck %s

// optim_grads_params over dp_shard = 4: weights, moments and gradients are
// sharded (6 elements padded to 8, so 2 per rank; frozen parameters stay
// whole); weights are gathered before use, the gradients reduce-scattered
// in one bucket (padded rows [4, piece] joined along dim 1) and AdamW
// updates the local pieces.
// CHECK: meg.submesh @world[dp_shard]
// CHECK: meg.param @model.layers.0.w : tensor<6xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [6, 4]>
// CHECK: meg.param @b : tensor<2xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [6]>
// CHECK: meg.param frozen @frozen : tensor<6xf32> init #meg.init<ones>{{$}}
// CHECK: meg.param state @optimizer.exp_avg.b : tensor<2xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [6]>
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.*]] = meg.param_ref @b : tensor<2xf32>
// CHECK: %[[BF:.*]] = meg.all_gather_start %[[B]] over @world[dp_shard] dim 0 : tensor<2xf32> -> !meg.future<tensor<8xf32>>
// CHECK: %[[BW:.*]] = meg.wait %[[BF]]
// CHECK: meg.slice %[[BW]] [0] [6] [1] : tensor<8xf32>
// CHECK: %[[W:.*]] = meg.param_ref @model.layers.0.w : tensor<6xf32>
// CHECK: %[[WF:.*]] = meg.all_gather_start %[[W]] over @world[dp_shard] dim 0 : tensor<6xf32> -> !meg.future<tensor<24xf32>>
// CHECK: %[[WW:.*]] = meg.wait %[[WF]]
// CHECK: meg.reshape %[[WW]] : tensor<24xf32> to tensor<6x4xf32>
// CHECK: %[[Y:.*]] = meg.mul
// Batch-major results are gathered over the data-parallel group.
// CHECK: meg.all_gather %[[Y]] over @world[dp_shard] dim 0 : tensor<2x6xf32> -> tensor<8x6xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: meg.all_gather_start
// CHECK-NOT: meg.all_gather_start
// CHECK: %[[ROWS:.*]] = meg.concat %{{.*}}, %{{.*}} axis 1 : tensor<4x6xf32>, tensor<4x2xf32>
// CHECK: %[[FLAT:.*]] = meg.reshape %[[ROWS]] : tensor<4x8xf32> to tensor<32xf32>
// CHECK: %[[RS:.*]] = meg.reduce_scatter_start %[[FLAT]] over @world[dp_shard] dim 0 avg : tensor<32xf32> -> !meg.future<tensor<8xf32>>
// CHECK: %[[G:.*]] = meg.wait %[[RS]]
// CHECK: %[[GW:.*]] = meg.slice %[[G]] [0] [6] [1]
// CHECK: %[[GB:.*]] = meg.slice %[[G]] [6] [2] [1]
// CHECK: %[[P:.*]], %[[M:.*]], %[[V:.*]] = meg.adamw %[[W2:.*]], %[[GW]], {{.*}} : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i64>
// CHECK: meg.adamw %{{.*}}, %[[GB]], {{.*}} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i64>
// CHECK: meg.param_store @model.layers.0.w, %[[P]] : tensor<6xf32>
// CHECK: meg.param_store @optimizer.exp_avg.model.layers.0.w, %[[M]] : tensor<6xf32>
// CHECK: %[[LOSS:.*]] = meg.all_reduce %{{.*}} over @world[dp_shard] avg : tensor<f32>
// CHECK: return %[[LOSS]]
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard"]>} {
  meg.mesh @world [dp_outer = 1, dp_shard = 4, tp = 1]
  meg.param @model.layers.0.w : tensor<6x4xf32> init #meg.init<normal(0.02)>
  meg.param @b : tensor<6xf32> init #meg.init<zeros>
  meg.param frozen @frozen : tensor<6xf32> init #meg.init<ones>
  func.func @forward(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<2x6xf32> {meg.name = "y"}) {
    %w = meg.param_ref @model.layers.0.w : tensor<6x4xf32>
    %b = meg.param_ref @b : tensor<6xf32>
    %f = meg.param_ref @frozen : tensor<6xf32>
    %y = meg.linear %x, %w bias %b : tensor<2x4xf32>, tensor<6x4xf32>, tensor<6xf32>
    %z = meg.mul %y, %f : tensor<2x6xf32>, tensor<6xf32>
    return %z : tensor<2x6xf32>
  }
  func.func @loss(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<f32> {meg.name = "loss"}) {
    %w = meg.param_ref @model.layers.0.w : tensor<6x4xf32>
    %b = meg.param_ref @b : tensor<6xf32>
    %f = meg.param_ref @frozen : tensor<6xf32>
    %y = meg.linear %x, %w bias %b : tensor<2x4xf32>, tensor<6x4xf32>, tensor<6xf32>
    %z = meg.mul %y, %f : tensor<2x6xf32>, tensor<6xf32>
    %l = meg.reduce mean %z dims [0, 1] : tensor<2x6xf32>
    return %l : tensor<f32>
  }
}

// -----

// HSDP with optim over dp_shard = 2 and no_shard over dp_outer = 2:
// replicated weights and gradients, sharded moments. The bucket is
// all-reduced on dp_shard then on dp_outer; the optimizer takes its piece
// with shard_slice and the updated weight is all-gathered.
// CHECK: meg.submesh @world[dp_shard]
// CHECK: meg.submesh @world[dp_outer]
// CHECK: meg.submesh @world[dp_outer, dp_shard]
// CHECK: meg.param @w : tensor<6x4xf32> init #meg.init<normal(0.02)>{{$}}
// CHECK: meg.param state @optimizer.exp_avg.w : tensor<12xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [6, 4]>
// CHECK-LABEL: func.func @grad
// CHECK: meg.all_reduce %{{.*}} over @world[dp_outer, dp_shard] avg : tensor<f32>
// CHECK: meg.all_reduce %{{.*}} over @world[dp_outer, dp_shard] avg : tensor<6x4xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: meg.all_gather_start
// CHECK: %[[AR:.*]] = meg.all_reduce_start %{{.*}} over @world[dp_shard] avg : tensor<24xf32> -> !meg.future<tensor<24xf32>>
// CHECK: %[[G:.*]] = meg.wait %[[AR]]
// CHECK: %[[OUTER:.*]] = meg.all_reduce %[[G]] over @world[dp_outer] avg : tensor<24xf32>
// CHECK: %[[GP:.*]] = meg.shard_slice %[[OUTER]] over @world[dp_shard] dim 0 : tensor<24xf32> -> tensor<12xf32>
// CHECK: %[[WP:.*]] = meg.shard_slice %{{.*}} over @world[dp_shard] dim 0 : tensor<24xf32> -> tensor<12xf32>
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}} = meg.adamw %[[WP]], %[[GP]],
// CHECK: %[[FULL:.*]] = meg.all_gather %[[P]] over @world[dp_shard] dim 0 : tensor<12xf32> -> tensor<24xf32>
// CHECK: %[[NEW:.*]] = meg.reshape %[[FULL]] : tensor<24xf32> to tensor<6x4xf32>
// CHECK: meg.param_store @w, %[[NEW]] : tensor<6x4xf32>
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["dp_shard"], outer = ["dp_outer"]>} {
  meg.mesh @world [dp_outer = 2, dp_shard = 2, tp = 1]
  meg.param @w : tensor<6x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<f32> {meg.name = "loss"}) {
    %w = meg.param_ref @w : tensor<6x4xf32>
    %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<6x4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x6xf32>
    return %l : tensor<f32>
  }
}

// -----

// A parameter that is a flat piece already is not sharded again (a
// tensor-parallel block would be).
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads, mesh = @world, shard = ["dp_shard"]>} {
  meg.mesh @world [dp_shard = 2, tp = 2]
  meg.submesh @world[tp]
  // expected-error @+1 {{meg-fsdp: @w is sharded already into pieces of the flattened tensor; only whole parameters and tensor-parallel blocks are sharded}}
  meg.param @w : tensor<2xf32> init #meg.init<zeros>
      sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [4]>
  func.func @loss(%x: tensor<2xf32>) -> tensor<f32> {
    %w = meg.param_ref @w : tensor<2xf32>
    %y = meg.mul %x, %w : tensor<2xf32>, tensor<2xf32>
    %l = meg.reduce mean %y dims [0] : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// A loss that ignores padding divides by the mean over the data-parallel
// group of each rank's label count: one all-reduce of one scalar, which
// the loss, its gradient and the returned loss all read.
// CHECK-LABEL: func.func @loss
// CHECK: %[[LOCAL:.*]] = meg.label_count %{{.*}} ignore -100 : tensor<2x8xi32>
// CHECK: %[[MEAN:.*]] = meg.all_reduce %[[LOCAL]] over @world[dp_shard] avg : tensor<f32>
// CHECK: meg.div %{{.*}}, %[[MEAN]]
// CHECK-LABEL: func.func @train_step
// CHECK: %[[LOCAL2:.*]] = meg.label_count %{{.*}} ignore -100 : tensor<2x8xi32>
// CHECK-NOT: global
// CHECK: %[[MEAN2:.*]] = meg.all_reduce %[[LOCAL2]] over @world[dp_shard] avg : tensor<f32>
// CHECK: meg.div %{{.*}}, %[[MEAN2]]
// CHECK: meg.div %{{.*}}, %[[MEAN2]]
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard"]>} {
  meg.mesh @world [dp_outer = 1, dp_shard = 4, tp = 1]
  meg.param @w : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x8x4xf32> {meg.name = "x"}, %labels: tensor<2x8xi32> {meg.name = "labels"}) -> (tensor<f32> {meg.name = "loss"}) {
    %w = meg.param_ref @w : tensor<16x4xf32>
    %y = meg.linear %x, %w : tensor<2x8x4xf32>, tensor<16x4xf32>
    %s = meg.cross_entropy %y, %labels sum ignore -100 : tensor<2x8x16xf32>, tensor<2x8xi32>
    %n = meg.label_count %labels ignore -100 global : tensor<2x8xi32>
    %l = meg.div %s, %n : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The count of non-finite values is summed over the data-parallel group
// before the updates read it, so that every rank skips the same steps; with
// clipping it checks the norm of the reduced gradients. The step returns
// the sum as it is (not averaged again).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[NORM:.*]] = meg.sqrt
// CHECK: %[[LOCAL:.*]] = meg.count_nonfinite %{{.*}}, %[[NORM]] : tensor<f32>, tensor<f32>
// CHECK: %[[BAD:.*]] = meg.all_reduce %[[LOCAL]] over @world[dp_shard] sum : tensor<f32>
// CHECK: meg.adamw {{.*}} skip(%[[BAD]] : tensor<f32>)
// CHECK: return %{{.*}}, %[[NORM]], %[[BAD]] : tensor<f32>, tensor<f32>, tensor<f32>
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, clip_grad = 1.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard"]>} {
  meg.mesh @world [dp_outer = 1, dp_shard = 4, tp = 1]
  meg.param @w : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @loss(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<f32> {meg.name = "loss"}) {
    %w = meg.param_ref @w : tensor<16x4xf32>
    %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<16x4xf32>
    %l = meg.reduce mean %y dims [0, 1] : tensor<2x16xf32>
    return %l : tensor<f32>
  }
}

// -----

// Expert parallelism: the dense group is dp_shard x ep, and the experts,
// blocks along dim 0 over ep, are sharded over the expert-data-parallel
// group dp_shard (registered by the pass). Expert gradients are scaled by
// 1/ep (each already sums the ep ranks' tokens) and reduce-scattered in a
// bucket of their own over dp_shard; dense gradients over dp_shard x ep.
// CHECK-LABEL: module @experts
// CHECK: meg.submesh @world[ep]
// CHECK: meg.submesh @world[dp_shard, ep]
// CHECK: meg.submesh @world[dp_shard]{{$}}
// CHECK: meg.param @router : tensor<1xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard", "ep"], shape = [4]>
// CHECK: meg.param @experts.w : tensor<2xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [4, 2], dim = 0, block_axes = ["ep"]> parts ["experts.0.w", "experts.1.w", "experts.2.w", "experts.3.w"]
// CHECK: meg.param state @optimizer.exp_avg.experts.w : tensor<2xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [4, 2], dim = 0, block_axes = ["ep"]>
// The grad entry's expert gradient: the mean over dp_shard, over ep.
// CHECK-LABEL: func.func @grad
// CHECK: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<1xf32>
// CHECK: %[[MEAN:.*]] = meg.all_reduce %{{.*}} over @world[dp_shard] avg : tensor<2x2xf32>
// CHECK: meg.mul %[[MEAN]], %[[HALF]] : tensor<2x2xf32>, tensor<1xf32>
// CHECK-LABEL: func.func @train_step
// CHECK: %[[HALF2:.*]] = arith.constant dense<5.000000e-01> : tensor<1xf32>
// CHECK-DAG: meg.all_gather_start %{{.*}} over @world[dp_shard] dim 0 : tensor<2xf32> -> !meg.future<tensor<4xf32>>
// CHECK-DAG: meg.all_gather_start %{{.*}} over @world[dp_shard, ep] dim 0 : tensor<1xf32> -> !meg.future<tensor<4xf32>>
// CHECK: meg.reduce_scatter_start %{{.*}} over @world[dp_shard, ep] dim 0 avg : tensor<4xf32> -> !meg.future<tensor<1xf32>>
// CHECK: %[[SCALED:.*]] = meg.mul %{{.*}}, %[[HALF2]] : tensor<4xf32>, tensor<1xf32>
// CHECK: meg.reduce_scatter_start %[[SCALED]] over @world[dp_shard] dim 0 avg : tensor<4xf32> -> !meg.future<tensor<2xf32>>
module @experts attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard", "ep"]>} {
  meg.mesh @world [dp_outer = 1, dp_shard = 2, ep = 2, tp = 1]
  meg.submesh @world[ep]
  meg.param @router : tensor<4xf32> init #meg.init<normal(0.02)>
  meg.param @experts.w : tensor<2x2xf32> init #meg.init<normal(0.02)>
      sharding #meg.sharding<mesh = @world, axes = ["ep"], shape = [4, 2], dim = 0>
      parts ["experts.0.w", "experts.1.w", "experts.2.w", "experts.3.w"]
  func.func @loss(%x: tensor<2x2xf32> {meg.name = "x"}) -> (tensor<f32> {meg.name = "loss"}) {
    %r = meg.param_ref @router : tensor<4xf32>
    %e = meg.param_ref @experts.w : tensor<2x2xf32>
    %sent = meg.all_to_all %x over @world[ep] : tensor<2x2xf32>
    %y = meg.mul %sent, %e : tensor<2x2xf32>, tensor<2x2xf32>
    %back = meg.all_to_all %y over @world[ep] : tensor<2x2xf32>
    %flat = meg.reshape %back : tensor<2x2xf32> to tensor<4xf32>
    %z = meg.mul %flat, %r : tensor<4xf32>, tensor<4xf32>
    %l = meg.reduce mean %z dims [0] : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// A layer (meg.layer, as the model's builder records it) is gathered as one
// unit: @q and @k, both of layer 0, start together before the first use;
// @model.layers.1.w, named like a layer but without meg.layer, is its own
// unit, gathered (prefetched) after them.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = meg.param_ref @q
// CHECK: %[[QF:.*]] = meg.all_gather_start %[[Q]]
// CHECK: %[[K:.*]] = meg.param_ref @k
// CHECK: %[[KF:.*]] = meg.all_gather_start %[[K]]
// CHECK: meg.wait %[[QF]]
// CHECK: meg.wait %[[KF]]
// CHECK: %[[W:.*]] = meg.param_ref @model.layers.1.w
// CHECK: %[[WF:.*]] = meg.all_gather_start %[[W]]
// CHECK: meg.linear %arg0
// CHECK: meg.wait %[[WF]]
module attributes {meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard"]>} {
  meg.mesh @world [dp_outer = 1, dp_shard = 2, tp = 1]
  meg.param @q : tensor<4x4xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @k : tensor<4x4xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @model.layers.1.w : tensor<4x4xf32> init #meg.init<normal(0.02)>
  func.func @forward(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<2x4xf32> {meg.name = "y"}) {
    %q = meg.param_ref @q : tensor<4x4xf32>
    %k = meg.param_ref @k : tensor<4x4xf32>
    %w = meg.param_ref @model.layers.1.w : tensor<4x4xf32>
    %a = meg.linear %x, %q : tensor<2x4xf32>, tensor<4x4xf32>
    %b = meg.linear %a, %w : tensor<2x4xf32>, tensor<4x4xf32>
    %c = meg.linear %b, %k : tensor<2x4xf32>, tensor<4x4xf32>
    return %c : tensor<2x4xf32>
  }
  func.func @loss(%x: tensor<2x4xf32> {meg.name = "x"}) -> (tensor<f32> {meg.name = "loss"}) {
    %q = meg.param_ref @q : tensor<4x4xf32>
    %k = meg.param_ref @k : tensor<4x4xf32>
    %w = meg.param_ref @model.layers.1.w : tensor<4x4xf32>
    %a = meg.linear %x, %q : tensor<2x4xf32>, tensor<4x4xf32>
    %b = meg.linear %a, %w : tensor<2x4xf32>, tensor<4x4xf32>
    %c = meg.linear %b, %k : tensor<2x4xf32>, tensor<4x4xf32>
    %l = meg.reduce mean %c dims [0, 1] : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// RUN: megc-opt %s --split-input-file --meg-autodiff --verify-diagnostics | FileCheck %s

// The gradient function returns the loss and one gradient per trainable
// parameter, in declaration order; frozen parameters get none.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: -> (tensor<f32> {meg.name = "loss"}, tensor<4x4xf32> {meg.grad_of = @w, meg.name = "grad.w"}, tensor<4xf32> {meg.grad_of = @b, meg.name = "grad.b"})
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: meg.broadcast
// CHECK: meg.matmul %{{.*}}, %{{.*}} transpose_lhs
// CHECK: return
meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
meg.param frozen @frozen : tensor<4x4xf32> init #meg.init<normal(0.02)>
meg.param @b : tensor<4xf32> init #meg.init<zeros>
func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4x4xf32>
  %f = meg.param_ref @frozen : tensor<4x4xf32>
  %b = meg.param_ref @b : tensor<4xf32>
  %h = meg.linear %x, %f : tensor<2x4xf32>, tensor<4x4xf32>
  %y = meg.linear %h, %w bias %b : tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>
  %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
  return %l : tensor<f32>
}

// -----

// A value used twice sums its gradients: d(w * w)/dw is the upstream
// gradient times w, once per use, and the two are added into grad.w.
// CHECK-LABEL: func.func @grad
// CHECK: %[[W:.*]] = meg.param_ref @w
// CHECK: %[[UP:.*]] = meg.broadcast
// CHECK-NEXT: %[[A:.*]] = meg.mul %[[UP]], %[[W]]
// CHECK-NEXT: %[[B:.*]] = meg.mul %[[UP]], %[[W]]
// CHECK-NEXT: %[[SUM:.*]] = meg.add %[[A]], %[[B]]
// CHECK-NEXT: return %{{.*}}, %[[SUM]]
meg.param @w : tensor<4xf32> init #meg.init<ones>
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4xf32>
  %sq = meg.mul %w, %w : tensor<4xf32>, tensor<4xf32>
  %l = meg.reduce sum %sq dims [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{meg-autodiff: no function @loss to differentiate}}
module {
  func.func @other() {
    return
  }
}

// -----

// expected-error @+1 {{meg-autodiff: @loss must return one floating-point scalar tensor}}
func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

meg.param @w : tensor<4xf32> init #meg.init<ones>
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4xf32>
  // expected-error @+1 {{meg-autodiff: 'meg.max' has no vector-Jacobian product but lies on the path to the loss}}
  %m = meg.max %w, %x : tensor<4xf32>, tensor<4xf32>
  %l = meg.reduce sum %m dims [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

meg.param @w : tensor<4xf32> init #meg.init<ones>
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4xf32>
  // expected-error @+1 {{'meg.reduce' op has no vector-Jacobian product for reduce max}}
  %l = meg.reduce max %w dims [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

func.func private @f(%x: tensor<4xf32>) -> tensor<f32>
meg.param @w : tensor<4xf32> init #meg.init<ones>
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4xf32>
  // expected-error @+1 {{meg-autodiff: inline calls before differentiating}}
  %l = func.call @f(%w) : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tensor parallelism: the gradient entering column-parallel layers
// (copy_to_group) is summed over the group, that of a row-parallel sum
// (all_reduce sum) passes through; afterwards no copy_to_group is left, in
// the loss either.
// CHECK-LABEL: func.func @loss
// CHECK-NOT: meg.copy_to_group
// CHECK: return
// CHECK-LABEL: func.func @grad
// CHECK-NOT: meg.copy_to_group
// CHECK: %[[H:.*]] = meg.linear %arg0, %{{.*}} : tensor<2x8xf32>, tensor<8x8xf32>
// CHECK: %[[P:.*]] = meg.linear %[[H]], %{{.*}} : tensor<2x8xf32>, tensor<4x8xf32>
// CHECK: meg.all_reduce %[[P]] over @world[tp] sum : tensor<2x4xf32>
// CHECK: %[[UP:.*]] = meg.broadcast
// CHECK: %[[DH:.*]] = meg.matmul %[[UP]], %{{.*}} : tensor<2x4xf32>, tensor<4x8xf32>
// CHECK: %[[SUMMED:.*]] = meg.all_reduce %[[DH]] over @world[tp] sum : tensor<2x8xf32>
// CHECK: %[[DW0:.*]] = meg.matmul %[[SUMMED]], %arg0 transpose_lhs
// CHECK: return %{{.*}}, %[[DW0]], %{{.*}}
meg.mesh @world [tp = 2]
meg.submesh @world[tp]
meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)>
meg.param @w : tensor<4x8xf32> init #meg.init<normal(0.02)>
    sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [8, 8], dim = 0>
func.func @loss(%x: tensor<2x8xf32>) -> tensor<f32> {
  %w0 = meg.param_ref @w0 : tensor<8x8xf32>
  %w = meg.param_ref @w : tensor<4x8xf32>
  %h = meg.linear %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32>
  %c = meg.copy_to_group %h over @world[tp] : tensor<2x8xf32>
  %p = meg.linear %c, %w : tensor<2x8xf32>, tensor<4x8xf32>
  %s = meg.all_reduce %p over @world[tp] sum : tensor<2x4xf32>
  %l = meg.reduce sum %s dims [0, 1] : tensor<2x4xf32>
  return %l : tensor<f32>
}

// -----

// An average over ranks has no gradient in a model.
meg.mesh @world [tp = 2]
meg.submesh @world[tp]
meg.param @w : tensor<4xf32> init #meg.init<ones>
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<4xf32>
  %y = meg.mul %x, %w : tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{'meg.all_reduce' op has no gradient with reduction avg (only the sum of a model's partial results does)}}
  %a = meg.all_reduce %y over @world[tp] avg : tensor<4xf32>
  %l = meg.reduce sum %a dims [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// Sequence parallelism's collectives: a gathered value's gradient is cut
// to the rank's shard, a shard's (of a replicated value) gathered, and a
// reduce-scattered sum's gathered for every rank's input.
// CHECK-LABEL: func.func @grad
// CHECK: %[[UP:.*]] = meg.broadcast %{{.*}} : tensor<1x1xf32> to tensor<4x2xf32>
// CHECK: %[[G1:.*]] = meg.all_gather %[[UP]] over @world[tp] dim 0 : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: %[[G2:.*]] = meg.shard_slice %{{.*}} over @world[tp] dim 0 : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK: %[[G3:.*]] = meg.all_gather %{{.*}} over @world[tp] dim 0 : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: return %{{.*}}, %[[G3]]
meg.mesh @world [tp = 2]
meg.submesh @world[tp]
meg.param @w : tensor<8x2xf32> init #meg.init<ones>
func.func @loss(%x: tensor<8x2xf32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<8x2xf32>
  %piece = meg.shard_slice %w over @world[tp] dim 0 : tensor<8x2xf32> -> tensor<4x2xf32>
  %full = meg.all_gather %piece over @world[tp] dim 0 : tensor<4x2xf32> -> tensor<8x2xf32>
  %y = meg.mul %full, %x : tensor<8x2xf32>, tensor<8x2xf32>
  %s = meg.reduce_scatter %y over @world[tp] dim 0 sum : tensor<8x2xf32> -> tensor<4x2xf32>
  %l = meg.reduce sum %s dims [0, 1] : tensor<4x2xf32>
  return %l : tensor<f32>
}

// -----

// A vocab-parallel cross-entropy: the statistics' gradient reaches the
// logits through vocab_shard_stats_grad; the maximum, behind stop_gradient,
// gets none (its reduce max has no VJP and is not asked for one).
// CHECK-LABEL: func.func @grad
// CHECK: %[[S:.*]], %[[T:.*]], %[[K:.*]] = meg.vocab_shard_stats
// CHECK: %[[DL:.*]] = meg.vocab_shard_stats_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>
// CHECK: %[[DLR:.*]] = meg.reshape %[[DL]]
// CHECK: %[[DW:.*]] = meg.matmul %[[DLR]], %{{.*}} transpose_lhs
// CHECK: return %{{.*}}, %[[DW]]
meg.param @w : tensor<8x3xf32> init #meg.init<normal(0.02)>
func.func @loss(%x: tensor<2x4x3xf32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %w = meg.param_ref @w : tensor<8x3xf32>
  %l = meg.linear %x, %w : tensor<2x4x3xf32>, tensor<8x3xf32>
  %m = meg.reduce max %l dims [2] : tensor<2x4x8xf32>
  %c = meg.stop_gradient %m : tensor<2x4xf32>
  %first = arith.constant dense<0> : tensor<i32>
  %s, %t, %k = meg.vocab_shard_stats %l, %c, %y, %first vocab 8 : tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<i32>
  %ls = meg.log %s : tensor<2x4xf32>
  %a = meg.add %ls, %c : tensor<2x4xf32>, tensor<2x4xf32>
  %d = meg.sub %a, %t : tensor<2x4xf32>, tensor<2x4xf32>
  %v = meg.mul %d, %k : tensor<2x4xf32>, tensor<2x4xf32>
  %r = meg.reduce sum %v dims [0, 1] : tensor<2x4xf32>
  return %r : tensor<f32>
}

// -----

// A mixture-of-experts layer: the router's weights get their gradient
// through meg.moe_route_grad (the selection and the frozen bias none);
// each gather's source gets the gradient rows its inverse lists, summed.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: -> (tensor<f32> {meg.name = "loss"}, tensor<4x8xf32> {meg.grad_of = @router, meg.name = "grad.router"}, tensor<8x8xf32> {meg.grad_of = @x, meg.name = "grad.x"})
// CHECK: %[[E:.*]], %[[W:.*]] = meg.moe_route
// CHECK: %{{.*}}, %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = meg.moe_assign %[[E]], %[[W]]
// CHECK: %[[INV:.*]] = meg.reshape %{{.*}} : tensor<4x4x1xi32> to tensor<16x1xi32>
// The combine's gradient reaches the experts' slots through the slot
// choices (the second gather's inverse).
// CHECK: %[[BACK:.*]] = meg.gather_rows %{{.*}}, %[[INV]] : tensor<16x8xf32>, tensor<16x1xi32> -> tensor<16x1x8xf32>
// CHECK: meg.reduce sum %[[BACK]] dims [1]
// The dispatch's gradient: each token sums its choices' slots.
// CHECK: %[[TOK:.*]] = meg.gather_rows %{{.*}}, %[[P]] : tensor<16x8xf32>, tensor<8x2xi32> -> tensor<8x2x8xf32>
// CHECK: meg.reduce sum %[[TOK]] dims [1]
// The router's gradient, through the weights only.
// CHECK: meg.moe_route_grad %{{.*}}, %{{.*}}, %[[E]] normalize scaling 2.000000e+00
meg.param @router : tensor<4x8xf32> init #meg.init<normal(0.02)>
meg.param @x : tensor<8x8xf32> init #meg.init<normal(0.02)>
meg.param frozen @bias : tensor<4xf32> init #meg.init<zeros>
func.func @loss() -> tensor<f32> {
  %x = meg.param_ref @x : tensor<8x8xf32>
  %r = meg.param_ref @router : tensor<4x8xf32>
  %b = meg.param_ref @bias : tensor<4xf32>
  %logits = meg.matmul %x, %r transpose_rhs : tensor<8x8xf32>, tensor<4x8xf32>
  %s = meg.sigmoid %logits : tensor<8x4xf32>
  %e, %w = meg.moe_route %s, %b top_k 2 groups 2 top_groups 1 normalize
      scaling 2.0 : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  %t, %c, %p, %l, %d = meg.moe_assign %e, %w experts 4 capacity 4 policy probs
      : tensor<8x2xi32>, tensor<8x2xf32> -> tensor<4x4xi32>, tensor<4x4xi32>,
        tensor<8x2xi32>, tensor<4xi32>, tensor<i32>
  %slots = meg.gather_rows %x, %t inverse %p
      : tensor<8x8xf32>, tensor<4x4xi32>, tensor<8x2xi32> -> tensor<4x4x8xf32>
  %rows = meg.reshape %slots : tensor<4x4x8xf32> to tensor<16x8xf32>
  %c1 = meg.reshape %c : tensor<4x4xi32> to tensor<4x4x1xi32>
  %c2 = meg.reshape %c1 : tensor<4x4x1xi32> to tensor<16x1xi32>
  %back = meg.gather_rows %rows, %p inverse %c2
      : tensor<16x8xf32>, tensor<8x2xi32>, tensor<16x1xi32> -> tensor<8x2x8xf32>
  %w3 = meg.reshape %w : tensor<8x2xf32> to tensor<8x2x1xf32>
  %weighted = meg.mul %back, %w3 : tensor<8x2x8xf32>, tensor<8x2x1xf32>
  %loss = meg.reduce sum %weighted dims [0, 1, 2] : tensor<8x2x8xf32>
  return %loss : tensor<f32>
}

// -----

// A gather without its inverse cannot pass a gradient to its source.
meg.param @x : tensor<8x8xf32> init #meg.init<normal(0.02)>
func.func @loss(%i: tensor<4xi32>) -> tensor<f32> {
  %x = meg.param_ref @x : tensor<8x8xf32>
  // expected-error @+1 {{'meg.gather_rows' op has no gradient with respect to its source without an inverse index}}
  %g = meg.gather_rows %x, %i : tensor<8x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %l = meg.reduce sum %g dims [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// An all-to-all's gradient is the all-to-all of the result's gradient: the
// exchange sends each piece back to the rank it came from.
// CHECK-LABEL: func.func @grad
// CHECK: %[[X:.*]] = meg.all_to_all %{{.*}} over @world[dp_shard] : tensor<8x4xf32>
// CHECK: %[[G:.*]] = meg.all_to_all %{{.*}} over @world[dp_shard] : tensor<8x4xf32>
// CHECK: return %{{.*}}, %[[G]]
meg.mesh @world [dp_outer = 1, dp_shard = 2, tp = 1]
meg.submesh @world[dp_shard]
meg.param @w : tensor<8x4xf32> init #meg.init<normal(0.02)>
func.func @loss() -> tensor<f32> {
  %w = meg.param_ref @w : tensor<8x4xf32>
  %x = meg.all_to_all %w over @world[dp_shard] : tensor<8x4xf32>
  %sq = meg.mul %x, %x : tensor<8x4xf32>, tensor<8x4xf32>
  %l = meg.reduce sum %sq dims [0, 1] : tensor<8x4xf32>
  return %l : tensor<f32>
}

// -----

// A shift's gradient is the shift of the result's gradient the other way:
// each gradient goes back to the rank its value came from.
// CHECK-LABEL: func.func @grad
// CHECK: meg.shift %{{.*}} over @world[dp_shard] by 1 : tensor<8x4xf32>
// CHECK: %[[G:.*]] = meg.shift %{{.*}} over @world[dp_shard] by -1 : tensor<8x4xf32>
// CHECK: return %{{.*}}, %[[G]]
meg.mesh @world [dp_outer = 1, dp_shard = 2, tp = 1]
meg.submesh @world[dp_shard]
meg.param @w : tensor<8x4xf32> init #meg.init<normal(0.02)>
func.func @loss() -> tensor<f32> {
  %w = meg.param_ref @w : tensor<8x4xf32>
  %x = meg.shift %w over @world[dp_shard] by 1 : tensor<8x4xf32>
  %sq = meg.mul %x, %x : tensor<8x4xf32>, tensor<8x4xf32>
  %l = meg.reduce sum %sq dims [0, 1] : tensor<8x4xf32>
  return %l : tensor<f32>
}

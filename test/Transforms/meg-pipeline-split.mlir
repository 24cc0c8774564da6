// RUN: megc-opt %s --split-input-file --meg-pipeline-split --verify-diagnostics | FileCheck %s

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

// -----

// Programs written by hand: what rank 0 sends rank 1 must be what rank 1
// receives, in order.
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  func.func @step_pp0(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 0 : i64} {
    %f = meg.send_start %x over @world[pp] to 1 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %w = meg.wait %f : !meg.future<tensor<4xf32>>
    return
  }
  func.func @step_pp1(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 1 : i64} {
    // expected-error @+1 {{meg-pipeline-split: receives 'tensor<8xf32>' as transfer 0 from rank 0, which sends 'tensor<4xf32>'}}
    %f = meg.recv_start over @world[pp] from 0 : !meg.future<tensor<8xf32>>
    %w = meg.wait %f : !meg.future<tensor<8xf32>>
    return
  }
}

// -----

module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  func.func @step_pp0(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 0 : i64} {
    // expected-error @+1 {{meg-pipeline-split: rank 1 of entry 'step' receives 0 transfers from rank 0, which sends 1; this send has no receive}}
    %f = meg.send_start %x over @world[pp] to 1 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %w = meg.wait %f : !meg.future<tensor<4xf32>>
    return
  }
  func.func @step_pp1(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 1 : i64} {
    return
  }
}

// -----

// Two ranks that each send before they receive, one transfer at a time:
// where a send waits until its receive is posted (as NCCL's may), each
// waits for the other.
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  func.func @step_pp0(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 0 : i64} {
    // expected-error @+1 {{meg-pipeline-split: entry 'step': pipeline rank 0 and rank 1 wait on each other here: this send (in batch 0 of the rank's transfers) may wait until the receive matching it is posted (a NCCL send may), which the peer issues only after transfers of its own that wait for this rank; issue transfers that cross in one batch (meg.send_start's batch)}}
    %s = meg.send_start %x over @world[pp] to 1 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %r = meg.recv_start over @world[pp] from 1 : !meg.future<tensor<4xf32>>
    %a = meg.wait %r : !meg.future<tensor<4xf32>>
    %b = meg.wait %s : !meg.future<tensor<4xf32>>
    return
  }
  func.func @step_pp1(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 1 : i64} {
    %s = meg.send_start %x over @world[pp] to 0 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %r = meg.recv_start over @world[pp] from 0 : !meg.future<tensor<4xf32>>
    %a = meg.wait %r : !meg.future<tensor<4xf32>>
    %b = meg.wait %s : !meg.future<tensor<4xf32>>
    return
  }
}

// -----

// The same transfers in one batch on each rank complete together.
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  // CHECK-LABEL: func.func @step_pp0
  // CHECK: meg.send_start %{{.*}} over @world[pp] to 1 in batch 0
  // CHECK: meg.recv_start over @world[pp] from 1 in batch 0
  func.func @step_pp0(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 0 : i64} {
    %s = meg.send_start %x over @world[pp] to 1 in batch 0 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %r = meg.recv_start over @world[pp] from 1 in batch 0 : !meg.future<tensor<4xf32>>
    %a = meg.wait %r : !meg.future<tensor<4xf32>>
    %b = meg.wait %s : !meg.future<tensor<4xf32>>
    return
  }
  func.func @step_pp1(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 1 : i64} {
    %s = meg.send_start %x over @world[pp] to 0 in batch 0 : tensor<4xf32> -> !meg.future<tensor<4xf32>>
    %r = meg.recv_start over @world[pp] from 0 in batch 0 : !meg.future<tensor<4xf32>>
    %a = meg.wait %r : !meg.future<tensor<4xf32>>
    %b = meg.wait %s : !meg.future<tensor<4xf32>>
    return
  }
}

// -----

module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1]>} {
  meg.mesh @world [pp = 2]
  meg.submesh @world[pp]
  // expected-error @+1 {{meg-pipeline-split: entry 'step' has programs for 1 of the 2 pipeline ranks}}
  func.func @step_pp0(%x: tensor<4xf32> {meg.name = "x"}) attributes {meg.entry_name = "step", meg.pipeline_rank = 0 : i64} {
    return
  }
}

// -----

// ZB-H1 over 2 micro-batches: a backward pass splits into B, what the
// gradient sent to the previous stage needs, and W, the rest; rank 1 runs
// both B passes (sending each gradient at once) and then the W passes,
// which fill the time rank 0 would otherwise make it wait. Rank 0's
// backward sends nothing: all of it is W.
// CHECK-LABEL: func.func @train_step_pp1(
// CHECK: %[[IN0:.*]] = meg.wait
// CHECK: %[[B0:.*]] = meg.linear %[[IN0]]
// CHECK-NEXT: %[[GI0:.*]] = meg.linear %[[B0]]
// CHECK-NEXT: meg.send_start %[[GI0]] over @world[pp] to 0
// CHECK: %[[IN1:.*]] = meg.wait
// CHECK: %[[B1:.*]] = meg.linear %[[IN1]]
// CHECK-NEXT: %[[GI1:.*]] = meg.linear %[[B1]]
// CHECK-NEXT: meg.send_start %[[GI1]] over @world[pp] to 0
// CHECK-NEXT: %[[W0:.*]] = meg.mul %[[B0]], %[[IN0]]
// CHECK-NEXT: %[[W1:.*]] = meg.mul %[[B1]], %[[IN1]]
// CHECK-NEXT: meg.add %[[W0]], %[[W1]]
module attributes {meg.micro_batches = 2 : i64, meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1], schedule = "zb-h1">} {
  meg.mesh @world [pp = 2]
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64, meg.stages = array<i64: 0>}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64, meg.stages = array<i64: 1>}
  func.func @train_step(%x0: tensor<2x4x8xf32> {meg.name = "x0"}, %x1: tensor<2x4x8xf32> {meg.name = "x1"}) -> (tensor<2x4x8xf32> {meg.name = "wgrad"}) {
    %w0 = meg.param_ref @w0 {meg.stage = 0 : i64} : tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.stage = 1 : i64} : tensor<8x8xf32>
    %a0 = meg.linear %x0, %w0 {meg.stage = 0 : i64, meg.micro_batch = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %b0 = meg.linear %a0, %w1 {meg.stage = 1 : i64, meg.micro_batch = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %gi0 = meg.linear %b0, %w1 {meg.stage = 1 : i64, meg.micro_batch = 0 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %gw0 = meg.mul %b0, %a0 {meg.stage = 1 : i64, meg.micro_batch = 0 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %gx0 = meg.linear %gi0, %w0 {meg.stage = 0 : i64, meg.micro_batch = 0 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %a1 = meg.linear %x1, %w0 {meg.stage = 0 : i64, meg.micro_batch = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %b1 = meg.linear %a1, %w1 {meg.stage = 1 : i64, meg.micro_batch = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %gi1 = meg.linear %b1, %w1 {meg.stage = 1 : i64, meg.micro_batch = 1 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %gw1 = meg.mul %b1, %a1 {meg.stage = 1 : i64, meg.micro_batch = 1 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %gx1 = meg.linear %gi1, %w0 {meg.stage = 0 : i64, meg.micro_batch = 1 : i64, meg.backward} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %gw = meg.add %gw0, %gw1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %gx = meg.add %gx0, %gx1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %all = meg.add %gw, %gx : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    return %all : tensor<2x4x8xf32>
  }
}

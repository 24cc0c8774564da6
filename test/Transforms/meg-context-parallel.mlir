// RUN: megc-opt %s --split-input-file --meg-context-parallel --verify-diagnostics | FileCheck %s

// cp = 2 over a sequence of 8: four chunks of 2, rank i holds chunks i and
// 3 - i, i.e. the cp order of the chunks is 0, 3, 1, 2 (offsets 0, 6, 2,
// 4) and each rank takes its half of it. The ids enter as this rank's
// chunks (the sequence moved to dim 0, one slice per chunk); the queries'
// positions are the cp-order constant's half (rank 0: 0 1 6 7, rank 1: 2 3
// 4 5). Keys and values are gathered over cp (dim 0 after a transpose),
// marked for a summed gradient, and put back into the original order by one
// gather of rows (chunks from places 0, 2, 3, 1), whose inverse index makes
// the gradient a gather too, once for both; the entry's result is gathered
// the same way. The pass registers @world[cp] and drops what it applied.
// CHECK-NOT: meg.context_parallel
// CHECK: meg.mesh @world [cp = 2]
// CHECK-NEXT: meg.submesh @world[cp]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32>
// CHECK: %[[CP:.*]] = arith.constant dense<[0, 1, 6, 7, 2, 3, 4, 5]> : tensor<8xi32>
// CHECK-NEXT: %[[POS:.*]] = meg.shard_slice %[[CP]] over @world[cp] dim 0 : tensor<8xi32> -> tensor<4xi32>
// CHECK-NEXT: %[[IT:.*]] = meg.transpose %[[IDS]] [1, 0]
// CHECK-NEXT: %[[I0:.*]] = meg.slice %[[IT]] [0, 0] [2, 1] [1, 1]
// CHECK-NEXT: %[[I1:.*]] = meg.slice %[[IT]] [6, 0] [2, 1] [1, 1]
// CHECK-NEXT: %[[I2:.*]] = meg.slice %[[IT]] [2, 0] [2, 1] [1, 1]
// CHECK-NEXT: %[[I3:.*]] = meg.slice %[[IT]] [4, 0] [2, 1] [1, 1]
// CHECK-NEXT: %[[ICP:.*]] = meg.concat %[[I0]], %[[I1]], %[[I2]], %[[I3]] axis 0
// CHECK-NEXT: %[[MINE:.*]] = meg.shard_slice %[[ICP]] over @world[cp] dim 0 : tensor<8x1xi32> -> tensor<4x1xi32>
// CHECK-NEXT: %[[LOCAL:.*]] = meg.transpose %[[MINE]] [1, 0]
// CHECK: %[[H:.*]] = meg.embedding %{{.*}}, %[[LOCAL]] : tensor<16x8xf32>, tensor<1x4xi32>
// CHECK-NEXT: %[[Q:.*]] = meg.reshape %[[H]] {meg.layer = 0 : i64} : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
// CHECK-NEXT: %[[KT:.*]] = meg.transpose %[[Q]] [1, 0, 2, 3] {meg.layer = 0 : i64}
// CHECK-NEXT: %[[KG:.*]] = meg.all_gather %[[KT]] over @world[cp] dim 0 {meg.layer = 0 : i64} : tensor<4x1x2x4xf32> -> tensor<8x1x2x4xf32>
// CHECK-NEXT: %[[KS:.*]] = meg.copy_to_group %[[KG]] over @world[cp]
// CHECK-NEXT: %[[KF:.*]] = meg.reshape %[[KS]] {meg.layer = 0 : i64} : tensor<8x1x2x4xf32> to tensor<8x8xf32>
// CHECK-NEXT: %[[IX:.*]] = arith.constant {meg.layer = 0 : i64} dense<[0, 1, 4, 5, 6, 7, 2, 3]> : tensor<8xi32>
// CHECK-NEXT: %[[INV:.*]] = arith.constant {meg.layer = 0 : i64} dense<{{\[}}[0], [1], [6], [7], [2], [3], [4], [5]]> : tensor<8x1xi32>
// CHECK-NEXT: %[[KO:.*]] = meg.gather_rows %[[KF]], %[[IX]] inverse %[[INV]] {meg.layer = 0 : i64} : tensor<8x8xf32>, tensor<8xi32>, tensor<8x1xi32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[KR:.*]] = meg.reshape %[[KO]] {meg.layer = 0 : i64} : tensor<8x8xf32> to tensor<8x1x2x4xf32>
// CHECK-NEXT: %[[K:.*]] = meg.transpose %[[KR]] [1, 0, 2, 3]
// CHECK-NEXT: %[[O:.*]] = meg.attention %[[Q]], %[[K]], %[[K]] causal positions(%[[POS]] : tensor<4xi32>) scale 5.000000e-01 {meg.layer = 0 : i64} : tensor<1x4x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
// CHECK-NEXT: %[[R:.*]] = meg.reshape %[[O]] {meg.layer = 0 : i64} : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
// CHECK: meg.all_gather %{{.*}} over @world[cp] dim 0 : tensor<4x1x8xf32> -> tensor<8x1x8xf32>
// CHECK: meg.gather_rows
// CHECK: %[[W:.*]] = meg.transpose
// CHECK-NEXT: return %[[W]] : tensor<1x8x8xf32>
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    %q = meg.reshape %h {meg.layer = 0 : i64} : tensor<1x8x8xf32> to tensor<1x8x2x4xf32>
    %o = meg.attention %q, %q, %q causal scale 0.5 {meg.layer = 0 : i64} : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    %r = meg.reshape %o {meg.layer = 0 : i64} : tensor<1x8x2x4xf32> to tensor<1x8x8xf32>
    return %r : tensor<1x8x8xf32>
  }
}

// -----

// cp = 4 over 16 tokens: eight chunks of 2 in cp order 0 7 1 6 2 5 3 4;
// RoPE tables computed whole from the positions (longer than the
// sequence: their first 16 rows) are cut like the tokens; a norm, a linear
// layer and an elementwise product keep the split; the loss and the label
// count are this rank's, the count of the whole samples scaled by 1/4.
// CHECK-LABEL: func.func @loss
// CHECK: arith.constant dense<[0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10, 11, 6, 7, 8, 9]> : tensor<16xi32>
// CHECK-NEXT: %[[POS:.*]] = meg.shard_slice %{{.*}} over @world[cp] dim 0 : tensor<16xi32> -> tensor<4xi32>
// CHECK: meg.slice %[[IDS:.*]] [0, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [14, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [2, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [12, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [4, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [10, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [6, 0] [2, 2] [1, 1]
// CHECK-NEXT: meg.slice %[[IDS]] [8, 0] [2, 2] [1, 1]
// CHECK: meg.shard_slice %{{.*}} over @world[cp] dim 0 : tensor<16x2xi32> -> tensor<4x2xi32>
// CHECK: meg.slice %{{.*}} [0, 0] [16, 4] [1, 1] : tensor<20x4xf32>
// CHECK: meg.gather_rows %{{.*}} : tensor<16x4xf32>, tensor<16xi32>, tensor<16x1xi32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[COSL:.*]] = meg.shard_slice %{{.*}} over @world[cp] dim 0 : tensor<16x4xf32> -> tensor<4x4xf32>
// CHECK: meg.rope %{{.*}}, %[[COSL]], %{{.*}} layout bshd : tensor<2x4x2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
// CHECK: meg.attention {{.*}} causal positions(%[[POS]] : tensor<4xi32>) {{.*}} : tensor<2x4x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
// CHECK: %[[CE:.*]] = meg.cross_entropy %{{.*}}, %{{.*}} sum ignore -100 : tensor<2x4x16xf32>, tensor<2x4xi32>
// CHECK: %[[N:.*]] = meg.label_count %[[LABELS:.*]] ignore -100 global : tensor<2x16xi32>
// CHECK-NEXT: %[[Q:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[NQ:.*]] = meg.mul %[[N]], %[[Q]]
// CHECK-NEXT: meg.div %[[CE]], %[[NQ]]
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [dp_shard = 1, cp = 4]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  meg.param @norm : tensor<8xf32> init #meg.init<ones>
  meg.param @head : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @loss(%ids: tensor<2x16xi32> {meg.name = "input_ids"}, %labels: tensor<2x16xi32> {meg.name = "labels"}) -> (tensor<f32> {meg.name = "loss"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<2x16xi32>
    %p = meg.iota dim 0 : tensor<20xf32>
    %p2 = meg.reshape %p : tensor<20xf32> to tensor<20x1xf32>
    %f = arith.constant dense<[1.0, 0.5, 1.0, 0.5]> : tensor<4xf32>
    %a = meg.mul %p2, %f : tensor<20x1xf32>, tensor<4xf32>
    %cos = meg.cos %a : tensor<20x4xf32>
    %sin = meg.sin %a : tensor<20x4xf32>
    %wn = meg.param_ref @norm : tensor<8xf32>
    %n = meg.rms_norm %h, %wn eps 1.0e-5 : tensor<2x16x8xf32>, tensor<8xf32>
    %q = meg.reshape %n : tensor<2x16x8xf32> to tensor<2x16x2x4xf32>
    %qr = meg.rope %q, %cos, %sin layout bshd : tensor<2x16x2x4xf32>, tensor<20x4xf32>, tensor<20x4xf32>
    %o = meg.attention %qr, %qr, %q causal scale 0.5 : tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
    %r = meg.reshape %o : tensor<2x16x2x4xf32> to tensor<2x16x8xf32>
    %g = meg.mul %r, %h : tensor<2x16x8xf32>, tensor<2x16x8xf32>
    %wh = meg.param_ref @head : tensor<16x8xf32>
    %logits = meg.linear %g, %wh : tensor<2x16x8xf32>, tensor<16x8xf32>
    %ce = meg.cross_entropy %logits, %labels sum ignore -100 : tensor<2x16x16xf32>, tensor<2x16xi32>
    %cnt = meg.label_count %labels ignore -100 global : tensor<2x16xi32>
    %l = meg.div %ce, %cnt : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error @+1 {{meg-context-parallel: the model has no attention whose sequence could be split}}
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    return %h : tensor<1x8x8xf32>
  }
}

// -----

module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x6xi32> {meg.name = "input_ids"}) -> (tensor<1x6x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    // expected-error @+1 {{meg-context-parallel: the sequence of 6 tokens does not split into 2 x 2 = 4 equal chunks (each context-parallel rank holds two, for causal load balancing)}}
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x6xi32>
    return %h : tensor<1x6x8xf32>
  }
}

// -----

module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    // expected-error @+1 {{meg-context-parallel: 'meg.data_sum' has no context-parallel form (its operand holds this rank's chunks of the sequence)}}
    %s = meg.data_sum %h : tensor<1x8x8xf32>
    return %s : tensor<1x8x8xf32>
  }
}

// -----

// A learned position table would need its gradient's pieces summed.
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  meg.param @pos : tensor<8x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    %p = meg.param_ref @pos : tensor<8x8xf32>
    // expected-error @+1 {{meg-context-parallel: a sequence-long value computed from parameter @pos meets the split sequence; only parameter-free ones (positions, RoPE tables) are sliced}}
    %x = meg.add %h, %p : tensor<1x8x8xf32>, tensor<8x8xf32>
    %q = meg.reshape %x : tensor<1x8x8xf32> to tensor<1x8x2x4xf32>
    %o = meg.attention %q, %q, %q causal scale 0.5 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    %r = meg.reshape %o : tensor<1x8x2x4xf32> to tensor<1x8x8xf32>
    return %r : tensor<1x8x8xf32>
  }
}

// -----

// expected-error @+1 {{meg-context-parallel: a training model sums its gradients over the context-parallel ranks in meg-fsdp's group: meg.fsdp must name ["cp"] among its shard and context_axes}}
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>, meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>, meg.fsdp = #meg.fsdp<strategy = no_shard, mesh = @world, shard = ["dp_shard", "cp"]>} {
  meg.mesh @world [dp_shard = 1, cp = 2]
}

// -----

// A model that reads no tokens (a diffusion transformer's latents).
// expected-error @+1 {{meg-context-parallel: the model reads no token sequence to split (the ids of a meg.embedding, the labels of a meg.cross_entropy or meg.label_count)}}
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  func.func @forward(%x: tensor<1x8x2x4xf32> {meg.name = "latents"}) -> (tensor<1x8x2x4xf32> {meg.name = "y"}) {
    %o = meg.attention %x, %x, %x scale 0.5 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    return %o : tensor<1x8x2x4xf32>
  }
}

// -----

// attention = ring: the attention of this rank's chunks becomes one
// meg.ring_attention of its local q, k and v (meg-ring-attention expands
// it); nothing is gathered for it and no positions are made.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: arith.constant dense<[0, 1, 6, 7, 2, 3, 4, 5]>
// CHECK: %[[H:.*]] = meg.embedding
// CHECK-NEXT: %[[Q:.*]] = meg.reshape %[[H]] {meg.layer = 0 : i64} : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
// CHECK-NEXT: %[[O:.*]] = meg.ring_attention %[[Q]], %[[Q]], %[[Q]] over @world[cp] scale 5.000000e-01 {meg.layer = 0 : i64} : tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>
// CHECK-NEXT: meg.reshape %[[O]] {meg.layer = 0 : i64} : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"], attention = ring>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    %q = meg.reshape %h {meg.layer = 0 : i64} : tensor<1x8x8xf32> to tensor<1x8x2x4xf32>
    %o = meg.attention %q, %q, %q causal scale 0.5 {meg.layer = 0 : i64} : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    %r = meg.reshape %o {meg.layer = 0 : i64} : tensor<1x8x2x4xf32> to tensor<1x8x8xf32>
    return %r : tensor<1x8x8xf32>
  }
}

// -----

// The ring's chunks are balanced for the causal mask.
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"], attention = ring>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    %q = meg.reshape %h : tensor<1x8x8xf32> to tensor<1x8x2x4xf32>
    // expected-error @+1 {{meg-context-parallel: ring attention splits causal attention only (its chunks are load-balanced for the causal mask); this attention is not causal: use the all-gather algorithm}}
    %o = meg.attention %q, %q, %q scale 0.5 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    %r = meg.reshape %o : tensor<1x8x2x4xf32> to tensor<1x8x8xf32>
    return %r : tensor<1x8x8xf32>
  }
}

// -----

// Mixture-of-experts routing of this rank's tokens (cp = 2, 2 x 8 tokens):
// the batch and this rank's 4 tokens of each sequence merge into 8 token
// rows; the router's choices are per token; each expert's capacity on a
// rank is its share (16 -> 8 slots), and the gathers between tokens and
// slots stay on the rank. The rows split back into [batch, sequence]
// innermost. A sum over the split sequence (a sequence-wise statistic)
// adds up the ranks' partial sums, whose gradient is summed over the group
// too (meg.copy_to_group).
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = meg.reshape %{{.*}} : tensor<2x4x8xf32> to tensor<8x8xf32>
// CHECK: %[[S:.*]] = meg.sigmoid %{{.*}} : tensor<8x4xf32>
// CHECK: %[[E:.*]], %[[W:.*]] = meg.moe_route %[[S]], %{{.*}} : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
// CHECK-NEXT: %[[TOK:.*]], %[[CH:.*]], %[[POS:.*]], %{{.*}}, %{{.*}} = meg.moe_assign %[[E]], %[[W]] experts 4 capacity 8 policy probs : tensor<8x2xi32>, tensor<8x2xf32> -> tensor<4x8xi32>, tensor<4x8xi32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i32>
// CHECK-NEXT: %[[SLOTS:.*]] = meg.gather_rows %[[X]], %[[TOK]] inverse %[[POS]] : tensor<8x8xf32>, tensor<4x8xi32>, tensor<8x2xi32> -> tensor<4x8x8xf32>
// CHECK: %[[Y:.*]] = meg.matmul %[[SLOTS]], %{{.*}} transpose_rhs : tensor<4x8x8xf32>, tensor<4x8x8xf32>
// CHECK-NEXT: %[[ROWS:.*]] = meg.reshape %[[Y]] : tensor<4x8x8xf32> to tensor<32x8xf32>
// CHECK-NEXT: %[[C:.*]] = meg.reshape %[[CH]] : tensor<4x8xi32> to tensor<32x1xi32>
// CHECK-NEXT: %[[BACK:.*]] = meg.gather_rows %[[ROWS]], %[[POS]] inverse %[[C]] : tensor<32x8xf32>, tensor<8x2xi32>, tensor<32x1xi32> -> tensor<8x2x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = meg.reduce sum %[[BACK]] dims [1] : tensor<8x2x8xf32>
// CHECK-NEXT: meg.reshape %[[SUM]] : tensor<8x8xf32> to tensor<2x4x8xf32>
// CHECK: %[[SEQ:.*]] = meg.reshape %[[S]] : tensor<8x4xf32> to tensor<2x4x4xf32>
// CHECK-NEXT: %[[PART:.*]] = meg.reduce sum %[[SEQ]] dims [0, 1] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = meg.all_reduce %[[PART]] over @world[cp] sum : tensor<4xf32>
// CHECK-NEXT: %[[SHARE:.*]] = meg.copy_to_group %[[TOTAL]] over @world[cp] : tensor<4xf32>
// CHECK: return %{{.*}}, %[[SHARE]] : tensor<2x8x8xf32>, tensor<4xf32>
module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  meg.param @router : tensor<4x8xf32> init #meg.init<normal(0.02)>
  meg.param @bias : tensor<4xf32> init #meg.init<zeros>
  meg.param @experts : tensor<4x8x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x8xi32> {meg.name = "input_ids"}) -> (tensor<2x8x8xf32> {meg.name = "h"}, tensor<4xf32> {meg.name = "share"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<2x8xi32>
    %x = meg.reshape %h : tensor<2x8x8xf32> to tensor<16x8xf32>
    %r = meg.param_ref @router : tensor<4x8xf32>
    %logits = meg.matmul %x, %r transpose_rhs : tensor<16x8xf32>, tensor<4x8xf32>
    %scores = meg.sigmoid %logits : tensor<16x4xf32>
    %b = meg.param_ref @bias : tensor<4xf32>
    %experts, %weights = meg.moe_route %scores, %b top_k 2 groups 1 top_groups 1 scaling 1.0 : tensor<16x4xf32>, tensor<4xf32> -> tensor<16x2xi32>, tensor<16x2xf32>
    %tok, %choice, %pos, %load, %dropped = meg.moe_assign %experts, %weights experts 4 capacity 16 policy probs : tensor<16x2xi32>, tensor<16x2xf32> -> tensor<4x16xi32>, tensor<4x16xi32>, tensor<16x2xi32>, tensor<4xi32>, tensor<i32>
    %slots = meg.gather_rows %x, %tok inverse %pos : tensor<16x8xf32>, tensor<4x16xi32>, tensor<16x2xi32> -> tensor<4x16x8xf32>
    %w = meg.param_ref @experts : tensor<4x8x8xf32>
    %y = meg.matmul %slots, %w transpose_rhs : tensor<4x16x8xf32>, tensor<4x8x8xf32>
    %rows = meg.reshape %y : tensor<4x16x8xf32> to tensor<64x8xf32>
    %c = meg.reshape %choice : tensor<4x16xi32> to tensor<64x1xi32>
    %back = meg.gather_rows %rows, %pos inverse %c : tensor<64x8xf32>, tensor<16x2xi32>, tensor<64x1xi32> -> tensor<16x2x8xf32>
    %sum = meg.reduce sum %back dims [1] : tensor<16x2x8xf32>
    %o = meg.reshape %sum : tensor<16x8xf32> to tensor<2x8x8xf32>
    %q = meg.reshape %o : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
    %a = meg.attention %q, %q, %q causal scale 0.5 : tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>
    %out = meg.reshape %a : tensor<2x8x2x4xf32> to tensor<2x8x8xf32>
    %seq = meg.reshape %scores : tensor<16x4xf32> to tensor<2x8x4xf32>
    %share = meg.reduce sum %seq dims [0, 1] : tensor<2x8x4xf32>
    return %out, %share : tensor<2x8x8xf32>, tensor<4xf32>
  }
}

// -----

module attributes {meg.context_parallel = #meg.context_parallel<mesh = @world, axes = ["cp"]>} {
  meg.mesh @world [cp = 2]
  meg.param @emb : tensor<16x8xf32> init #meg.init<normal(0.02)>
  meg.param @bias : tensor<4xf32> init #meg.init<zeros>
  func.func @forward(%ids: tensor<1x8xi32> {meg.name = "input_ids"}) -> (tensor<1x8x8xf32> {meg.name = "h"}) {
    %t = meg.param_ref @emb : tensor<16x8xf32>
    %h = meg.embedding %t, %ids : tensor<16x8xf32>, tensor<1x8xi32>
    %x = meg.reshape %h : tensor<1x8x8xf32> to tensor<8x8xf32>
    %s = meg.slice %x [0, 0] [8, 4] [1, 1] : tensor<8x8xf32>
    %scores = meg.sigmoid %s : tensor<8x4xf32>
    %b = meg.param_ref @bias : tensor<4xf32>
    %experts, %weights = meg.moe_route %scores, %b top_k 1 groups 1 top_groups 1 scaling 1.0 : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x1xi32>, tensor<8x1xf32>
    // expected-error @+1 {{meg-context-parallel: an expert's capacity of 3 slots does not split over the 2 context-parallel ranks}}
    %tok, %choice, %pos, %load, %dropped = meg.moe_assign %experts, %weights experts 4 capacity 3 policy probs : tensor<8x1xi32>, tensor<8x1xf32> -> tensor<4x3xi32>, tensor<4x3xi32>, tensor<8x1xi32>, tensor<4xi32>, tensor<i32>
    %q = meg.reshape %h : tensor<1x8x8xf32> to tensor<1x8x2x4xf32>
    %a = meg.attention %q, %q, %q causal scale 0.5 : tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>
    %out = meg.reshape %a : tensor<1x8x2x4xf32> to tensor<1x8x8xf32>
    return %out : tensor<1x8x8xf32>
  }
}

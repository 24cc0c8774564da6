// RUN: megc-opt %s --split-input-file --meg-tensor-parallel --verify-diagnostics | FileCheck %s

// An MLP block over tp = 2: gate and up column-parallel (their weights'
// row blocks; the normed input enters the group, once for both), the
// product on this rank's features, down row-parallel (its weight's column
// block) and summed over tp, its bias added once after the sum. The layer
// tag stays on what the pass inserts; the splits are the parameters'
// shardings now, and the pass drops what it applied.
// CHECK-NOT: meg.tensor_parallel
// CHECK: meg.mesh @world [tp = 2]
// CHECK-NEXT: meg.submesh @world[tp]
// CHECK-NEXT: meg.param @norm : tensor<8xf32> init #meg.init<ones>{{$}}
// CHECK-NEXT: meg.param @gate : tensor<6x8xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [12, 8], dim = 0>
// CHECK-NEXT: meg.param @up : tensor<6x8xf32> {{.*}} shape = [12, 8], dim = 0>
// CHECK-NEXT: meg.param @down : tensor<8x6xf32> {{.*}} shape = [8, 12], dim = 1>
// CHECK-NEXT: meg.param @down_bias : tensor<8xf32> init #meg.init<zeros>{{$}}
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[H:.*]]: tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[N:.*]] = meg.rms_norm %[[H]]
// CHECK-NEXT: %[[X:.*]] = meg.copy_to_group %[[N]] over @world[tp] {meg.layer = 0 : i64} : tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = meg.linear %[[X]], %{{.*}} {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<6x8xf32>
// CHECK: %[[U:.*]] = meg.linear %[[X]], %{{.*}} {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<6x8xf32>
// CHECK: %[[S:.*]] = meg.silu %[[G]] {meg.layer = 0 : i64} : tensor<2x4x6xf32>
// CHECK: %[[P:.*]] = meg.mul %[[S]], %[[U]] {meg.layer = 0 : i64} : tensor<2x4x6xf32>, tensor<2x4x6xf32>
// CHECK: %[[D:.*]] = meg.param_ref @down {{.*}}: tensor<8x6xf32>
// CHECK: %[[B:.*]] = meg.param_ref @down_bias
// CHECK: %[[PART:.*]] = meg.linear %[[P]], %[[D]] {meg.layer = 0 : i64} : tensor<2x4x6xf32>, tensor<8x6xf32>
// CHECK-NEXT: %[[SUM:.*]] = meg.all_reduce %[[PART]] over @world[tp] sum {meg.layer = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = meg.add %[[SUM]], %[[B]] {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NOT: meg.tp_layer
// CHECK: return %[[Y]]
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.param @norm : tensor<8xf32> init #meg.init<ones>
  meg.param @gate : tensor<12x8xf32> init #meg.init<normal(0.02)>
  meg.param @up : tensor<12x8xf32> init #meg.init<normal(0.02)>
  meg.param @down : tensor<8x12xf32> init #meg.init<normal(0.02)>
  meg.param @down_bias : tensor<8xf32> init #meg.init<zeros>
  func.func @mlp(%h: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %nw = meg.param_ref @norm {meg.layer = 0 : i64} : tensor<8xf32>
    %x = meg.rms_norm %h, %nw eps 1.0e-05 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8xf32>
    %wg = meg.param_ref @gate {meg.layer = 0 : i64} : tensor<12x8xf32>
    %g = meg.linear %x, %wg {meg.layer = 0 : i64, meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x8xf32>, tensor<12x8xf32>
    %wu = meg.param_ref @up {meg.layer = 0 : i64} : tensor<12x8xf32>
    %u = meg.linear %x, %wu {meg.layer = 0 : i64, meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x8xf32>, tensor<12x8xf32>
    %s = meg.silu %g {meg.layer = 0 : i64} : tensor<2x4x12xf32>
    %p = meg.mul %s, %u {meg.layer = 0 : i64} : tensor<2x4x12xf32>, tensor<2x4x12xf32>
    %wd = meg.param_ref @down {meg.layer = 0 : i64} : tensor<8x12xf32>
    %b = meg.param_ref @down_bias {meg.layer = 0 : i64} : tensor<8xf32>
    %y = meg.linear %p, %wd bias %b {meg.layer = 0 : i64, meg.tp_layer = #meg.tp_layer<row>} : tensor<2x4x12xf32>, tensor<8x12xf32>, tensor<8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// Attention over tp = 2: q (4 heads) and k/v (2 KV heads) column-parallel
// in whole heads with their biases (the input, a function argument, has no
// gradient to sum: it enters no group), the reshapes onto this rank's heads,
// a per-head norm whose weight enters the group (it weighs this rank's
// heads only, so its gradient is summed), attention on 2 query and 1 KV
// head, and o row-parallel.
// CHECK: meg.param @q_bias : tensor<8xf32> {{.*}} shape = [16], dim = 0>
// CHECK-LABEL: func.func @attention
// CHECK-NOT: meg.copy_to_group %arg0
// CHECK: %[[Q:.*]] = meg.linear %arg0, %{{.*}} bias %{{.*}} : tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>
// CHECK: %[[QH:.*]] = meg.reshape %[[Q]] : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
// CHECK: %[[K:.*]] = meg.linear %arg0, %{{.*}} : tensor<2x4x16xf32>, tensor<4x16xf32>
// CHECK: %[[KH:.*]] = meg.reshape %[[K]] : tensor<2x4x4xf32> to tensor<2x4x1x4xf32>
// CHECK: %[[KW:.*]] = meg.param_ref @k_norm
// CHECK-NEXT: %[[KWE:.*]] = meg.copy_to_group %[[KW]] over @world[tp] : tensor<4xf32>
// CHECK: %[[KN:.*]] = meg.rms_norm %[[KH]], %[[KWE]] eps 1.000000e-05 : tensor<2x4x1x4xf32>, tensor<4xf32>
// CHECK: %[[V:.*]] = meg.linear %arg0, %{{.*}} : tensor<2x4x16xf32>, tensor<4x16xf32>
// CHECK: %[[A:.*]] = meg.attention %[[QH]], %[[KN]], %{{.*}} causal scale 5.000000e-01 : tensor<2x4x2x4xf32>, tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>
// CHECK: %[[AF:.*]] = meg.reshape %[[A]] : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
// CHECK: %[[O:.*]] = meg.linear %[[AF]], %{{.*}} : tensor<2x4x8xf32>, tensor<16x8xf32>
// CHECK-NEXT: meg.all_reduce %[[O]] over @world[tp] sum : tensor<2x4x16xf32>
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.submesh @world[tp]
  meg.param @q : tensor<16x16xf32> init #meg.init<normal(0.02)>
  meg.param @q_bias : tensor<16xf32> init #meg.init<zeros>
  meg.param @k : tensor<8x16xf32> init #meg.init<normal(0.02)>
  meg.param @k_norm : tensor<4xf32> init #meg.init<ones>
  meg.param @v : tensor<8x16xf32> init #meg.init<normal(0.02)>
  meg.param @o : tensor<16x16xf32> init #meg.init<normal(0.02)>
  func.func @attention(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
    %wq = meg.param_ref @q : tensor<16x16xf32>
    %bq = meg.param_ref @q_bias : tensor<16xf32>
    %q = meg.linear %x, %wq bias %bq {meg.tp_layer = #meg.tp_layer<column, groups = 4>} : tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>
    %qh = meg.reshape %q : tensor<2x4x16xf32> to tensor<2x4x4x4xf32>
    %wk = meg.param_ref @k : tensor<8x16xf32>
    %k = meg.linear %x, %wk {meg.tp_layer = #meg.tp_layer<column, groups = 2>} : tensor<2x4x16xf32>, tensor<8x16xf32>
    %kh = meg.reshape %k : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
    %wkn = meg.param_ref @k_norm : tensor<4xf32>
    %kn = meg.rms_norm %kh, %wkn eps 1.0e-05 : tensor<2x4x2x4xf32>, tensor<4xf32>
    %wv = meg.param_ref @v : tensor<8x16xf32>
    %v = meg.linear %x, %wv {meg.tp_layer = #meg.tp_layer<column, groups = 2>} : tensor<2x4x16xf32>, tensor<8x16xf32>
    %vh = meg.reshape %v : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
    %a = meg.attention %qh, %kn, %vh causal scale 0.5 : tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
    %af = meg.reshape %a : tensor<2x4x4x4xf32> to tensor<2x4x16xf32>
    %wo = meg.param_ref @o : tensor<16x16xf32>
    %y = meg.linear %af, %wo {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x4x16xf32>, tensor<16x16xf32>
    return %y : tensor<2x4x16xf32>
  }
}

// -----

// Fewer KV heads (groups) than ranks (tp = 4, 2 groups): every rank holds
// the whole k weight and computes its group's head (ranks 0-1 head 0, 2-3
// head 1): one copy of a group's rows per rank, then this rank's.
// CHECK: meg.param @k : tensor<8x16xf32> init #meg.init<normal(0.02)>{{$}}
// CHECK-LABEL: func.func @groups
// CHECK: %[[W:.*]] = meg.param_ref @k : tensor<8x16xf32>
// CHECK: %[[ROWS:.*]] = meg.reshape %[[W]] : tensor<8x16xf32> to tensor<2x1x64xf32>
// CHECK-NEXT: %[[COPIES:.*]] = meg.broadcast %[[ROWS]] : tensor<2x1x64xf32> to tensor<2x2x64xf32>
// CHECK-NEXT: %[[PER_RANK:.*]] = meg.reshape %[[COPIES]] : tensor<2x2x64xf32> to tensor<4x64xf32>
// CHECK-NEXT: %[[MINE:.*]] = meg.shard_slice %[[PER_RANK]] over @world[tp] dim 0 : tensor<4x64xf32> -> tensor<1x64xf32>
// CHECK-NEXT: %[[BLOCK:.*]] = meg.reshape %[[MINE]] : tensor<1x64xf32> to tensor<4x16xf32>
// CHECK-NEXT: meg.linear %{{.*}}, %[[BLOCK]] : tensor<2x4x16xf32>, tensor<4x16xf32>
// CHECK: meg.attention {{.*}} : tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 4]
  meg.param @q : tensor<16x16xf32> init #meg.init<normal(0.02)>
  meg.param @k : tensor<8x16xf32> init #meg.init<normal(0.02)>
  meg.param @o : tensor<16x16xf32> init #meg.init<normal(0.02)>
  func.func @groups(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
    %wq = meg.param_ref @q : tensor<16x16xf32>
    %q = meg.linear %x, %wq {meg.tp_layer = #meg.tp_layer<column, groups = 4>} : tensor<2x4x16xf32>, tensor<16x16xf32>
    %qh = meg.reshape %q : tensor<2x4x16xf32> to tensor<2x4x4x4xf32>
    %wk = meg.param_ref @k : tensor<8x16xf32>
    %k = meg.linear %x, %wk {meg.tp_layer = #meg.tp_layer<column, groups = 2>} : tensor<2x4x16xf32>, tensor<8x16xf32>
    %kh = meg.reshape %k : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
    %a = meg.attention %qh, %kh, %kh causal scale 0.5 : tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
    %af = meg.reshape %a : tensor<2x4x4x4xf32> to tensor<2x4x16xf32>
    %wo = meg.param_ref @o : tensor<16x16xf32>
    %y = meg.linear %af, %wo {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x4x16xf32>, tensor<16x16xf32>
    return %y : tensor<2x4x16xf32>
  }
}

// -----

// Vocab parallelism over tp = 2: the embedding looks the ids up in this
// rank's 8 of 16 rows (rank r's first row from a table of the blocks'
// starts) and sums the rows over tp; the tied LM head gives this rank's 8
// classes; the forward gathers them (classes moved to dim 0 for the
// collective and back), the loss reduces them in place (Megatron's
// vocab-parallel cross-entropy) and divides by the 8 tokens.
// CHECK: meg.param @embed : tensor<8x4xf32> {{.*}} shape = [16, 4], dim = 0>
// CHECK-LABEL: func.func @forward
// CHECK: %[[STARTS:.*]] = arith.constant dense<[0, 8]> : tensor<2xi32>
// CHECK-NEXT: %[[MINE:.*]] = meg.shard_slice %[[STARTS]] over @world[tp] dim 0 : tensor<2xi32> -> tensor<1xi32>
// CHECK-NEXT: %[[FIRST:.*]] = meg.reshape %[[MINE]] : tensor<1xi32> to tensor<i32>
// CHECK-NEXT: %[[ROWS:.*]] = meg.embedding %{{.*}}, %arg0 rows from %[[FIRST]] : tensor<8x4xf32>, tensor<2x4xi32>, tensor<i32>
// CHECK-NEXT: %[[H:.*]] = meg.all_reduce %[[ROWS]] over @world[tp] sum : tensor<2x4x4xf32>
// CHECK-NEXT: %[[X:.*]] = meg.copy_to_group %[[H]] over @world[tp]
// CHECK-NEXT: %[[L:.*]] = meg.linear %[[X]], %{{.*}} : tensor<2x4x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[T:.*]] = meg.transpose %[[L]] [2, 0, 1] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[ALL:.*]] = meg.all_gather %[[T]] over @world[tp] dim 0 : tensor<8x2x4xf32> -> tensor<16x2x4xf32>
// CHECK-NEXT: %[[BACK:.*]] = meg.transpose %[[ALL]] [1, 2, 0] : tensor<16x2x4xf32>
// CHECK-NEXT: return %[[BACK]] : tensor<2x4x16xf32>
// CHECK-LABEL: func.func @loss
// CHECK: %[[L:.*]] = meg.linear
// CHECK-NEXT: %[[LMAX:.*]] = meg.reduce max %[[L]] dims [2] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[GMAX:.*]] = meg.all_reduce %[[LMAX]] over @world[tp] max : tensor<2x4xf32>
// CHECK-NEXT: %[[MAX:.*]] = meg.stop_gradient %[[GMAX]]
// CHECK: %[[SE:.*]], %[[TG:.*]], %[[MASK:.*]] = meg.vocab_shard_stats %[[L]], %[[MAX]], %arg1, %{{.*}} vocab 16 : tensor<2x4x8xf32>
// CHECK-NEXT: %[[SUMEXP:.*]] = meg.all_reduce %[[SE]] over @world[tp] sum
// CHECK-NEXT: %[[TARGET:.*]] = meg.all_reduce %[[TG]] over @world[tp] sum
// CHECK-NEXT: %[[LOG:.*]] = meg.log %[[SUMEXP]]
// CHECK-NEXT: %[[LSE:.*]] = meg.add %[[LOG]], %[[MAX]]
// CHECK-NEXT: %[[CE:.*]] = meg.sub %[[LSE]], %[[TARGET]]
// CHECK-NEXT: %[[COUNTED:.*]] = meg.mul %[[CE]], %[[MASK]]
// CHECK-NEXT: %[[TOTAL:.*]] = meg.reduce sum %[[COUNTED]] dims [0, 1] : tensor<2x4xf32>
// CHECK-NEXT: %[[TOKENS:.*]] = arith.constant dense<8.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = meg.div %[[TOTAL]], %[[TOKENS]]
// CHECK-NEXT: return %[[MEAN]]
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.param @embed : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x16xf32> {
    %e = meg.param_ref @embed : tensor<16x4xf32>
    %h = meg.embedding %e, %ids {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<16x4xf32>, tensor<2x4xi32>
    %l = meg.linear %h, %e {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x4xf32>, tensor<16x4xf32>
    return %l : tensor<2x4x16xf32>
  }
  func.func @loss(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
    %e = meg.param_ref @embed : tensor<16x4xf32>
    %h = meg.embedding %e, %ids {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<16x4xf32>, tensor<2x4xi32>
    %l = meg.linear %h, %e {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x4xf32>, tensor<16x4xf32>
    %c = meg.cross_entropy %l, %labels mean : tensor<2x4x16xf32>, tensor<2x4xi32>
    return %c : tensor<f32>
  }
}

// -----

// Sequence parallelism over tp = 2 on [batch, seq, hidden]: the embedding's
// rows are reduce-scattered into blocks of 2 of the 4 positions (the
// sequence moved to dim 0 for the collective and back), the norm runs on
// this rank's block (its weight enters the group), the column layer
// gathers the sequence, the row layer reduce-scatters its sum and adds its
// bias (entering the group too) to this rank's block, the residual add
// stays on the blocks, and the result is gathered.
// CHECK-LABEL: func.func @sequence
// CHECK: %[[E:.*]] = meg.embedding
// CHECK-NEXT: %[[ET:.*]] = meg.transpose %[[E]] [1, 0, 2] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[ES:.*]] = meg.reduce_scatter %[[ET]] over @world[tp] dim 0 sum : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT: %[[H:.*]] = meg.transpose %[[ES]] [1, 0, 2] : tensor<2x2x8xf32>
// CHECK: %[[NW:.*]] = meg.copy_to_group %{{.*}} over @world[tp] : tensor<8xf32>
// CHECK-NEXT: %[[N:.*]] = meg.rms_norm %[[H]], %[[NW]] {{.*}} : tensor<2x2x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[NT:.*]] = meg.transpose %[[N]] [1, 0, 2]
// CHECK-NEXT: %[[NG:.*]] = meg.all_gather %[[NT]] over @world[tp] dim 0 : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
// CHECK-NEXT: %[[X:.*]] = meg.transpose %[[NG]] [1, 0, 2]
// CHECK-NEXT: %[[XE:.*]] = meg.copy_to_group %[[X]] over @world[tp] : tensor<2x4x8xf32>
// CHECK: meg.linear %[[XE]], %{{.*}} : tensor<2x4x8xf32>, tensor<4x8xf32>
// CHECK: %[[BW:.*]] = meg.copy_to_group %{{.*}} over @world[tp] : tensor<8xf32>
// CHECK: %[[PART:.*]] = meg.linear %{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[PT:.*]] = meg.transpose %[[PART]] [1, 0, 2]
// CHECK-NEXT: %[[PS:.*]] = meg.reduce_scatter %[[PT]] over @world[tp] dim 0 sum : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT: %[[P:.*]] = meg.transpose %[[PS]] [1, 0, 2]
// CHECK-NEXT: %[[Y:.*]] = meg.add %[[P]], %[[BW]] : tensor<2x2x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[R:.*]] = meg.add %[[H]], %[[Y]] : tensor<2x2x8xf32>, tensor<2x2x8xf32>
// CHECK-NEXT: %[[RT:.*]] = meg.transpose %[[R]] [1, 0, 2]
// CHECK-NEXT: %[[RG:.*]] = meg.all_gather %[[RT]] over @world[tp] dim 0
// CHECK-NEXT: %[[OUT:.*]] = meg.transpose %[[RG]] [1, 0, 2]
// CHECK-NEXT: return %[[OUT]] : tensor<2x4x8xf32>
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"], sequence_parallel = true>} {
  meg.mesh @world [tp = 2]
  meg.param @embed : tensor<16x8xf32> init #meg.init<normal(0.02)>
  meg.param @norm : tensor<8xf32> init #meg.init<ones>
  meg.param @up : tensor<8x8xf32> init #meg.init<normal(0.02)>
  meg.param @down : tensor<8x8xf32> init #meg.init<normal(0.02)>
  meg.param @down_bias : tensor<8xf32> init #meg.init<zeros>
  func.func @sequence(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
    %e = meg.param_ref @embed : tensor<16x8xf32>
    %h = meg.embedding %e, %ids {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<16x8xf32>, tensor<2x4xi32>
    %nw = meg.param_ref @norm : tensor<8xf32>
    %n = meg.rms_norm %h, %nw eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>
    %wu = meg.param_ref @up : tensor<8x8xf32>
    %u = meg.linear %n, %wu {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wd = meg.param_ref @down : tensor<8x8xf32>
    %bd = meg.param_ref @down_bias : tensor<8xf32>
    %y = meg.linear %u, %wd bias %bd {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>
    %r = meg.add %h, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    return %r : tensor<2x4x8xf32>
  }
}

// -----

// Splits follow the data: a whole operand that is whole along the split
// dimension (a trainable scale over the features) is cut into this rank's
// block; a sum over the split features is completed over tp; a reshape
// that merges the split features with the dimension before them cannot
// keep the blocks, so the value is gathered first.
// CHECK-LABEL: func.func @follow
// CHECK: %[[U:.*]] = meg.linear {{.*}} : tensor<2x4x8xf32>, tensor<6x8xf32>
// CHECK: %[[SCALE:.*]] = meg.param_ref @scale : tensor<12xf32>
// CHECK-NEXT: %[[SLICED:.*]] = meg.shard_slice %[[SCALE]] over @world[tp] dim 0 : tensor<12xf32> -> tensor<6xf32>
// CHECK: %[[M:.*]] = meg.mul %[[U]], %[[SLICED]] : tensor<2x4x6xf32>, tensor<6xf32>
// CHECK-NEXT: %[[MT:.*]] = meg.transpose %[[M]] [2, 0, 1]
// CHECK-NEXT: %[[MG:.*]] = meg.all_gather %[[MT]] over @world[tp] dim 0 : tensor<6x2x4xf32> -> tensor<12x2x4xf32>
// CHECK-NEXT: %[[WHOLE:.*]] = meg.transpose %[[MG]] [1, 2, 0]
// CHECK-NEXT: %[[PART:.*]] = meg.reduce sum %[[M]] dims [2] : tensor<2x4x6xf32>
// CHECK-NEXT: %[[SUM:.*]] = meg.all_reduce %[[PART]] over @world[tp] sum : tensor<2x4xf32>
// CHECK-NEXT: %[[FLAT:.*]] = meg.reshape %[[WHOLE]] : tensor<2x4x12xf32> to tensor<2x48xf32>
// CHECK-NEXT: return %[[SUM]], %[[FLAT]]
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.param @up : tensor<12x8xf32> init #meg.init<normal(0.02)>
  meg.param @scale : tensor<12xf32> init #meg.init<ones>
  func.func @follow(%x: tensor<2x4x8xf32>) -> (tensor<2x4xf32>, tensor<2x48xf32>) {
    %wu = meg.param_ref @up : tensor<12x8xf32>
    %u = meg.linear %x, %wu {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x4x8xf32>, tensor<12x8xf32>
    %s = meg.param_ref @scale : tensor<12xf32>
    %m = meg.mul %u, %s : tensor<2x4x12xf32>, tensor<12xf32>
    %sum = meg.reduce sum %m dims [2] : tensor<2x4x12xf32>
    %flat = meg.reshape %m : tensor<2x4x12xf32> to tensor<2x48xf32>
    return %sum, %flat : tensor<2x4xf32>, tensor<2x48xf32>
  }
}

// -----

// Without #meg.tensor_parallel the model runs on one rank, where every
// layer is whole: the layers' splits are dropped.
// CHECK-LABEL: func.func @one_rank
// CHECK: meg.linear %arg0, %{{.*}} : tensor<2x8xf32>, tensor<12x8xf32>
module {
  meg.param @up : tensor<12x8xf32> init #meg.init<normal(0.02)>
  func.func @one_rank(%x: tensor<2x8xf32>) -> tensor<2x12xf32> {
    %w = meg.param_ref @up : tensor<12x8xf32>
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x8xf32>, tensor<12x8xf32>
    return %y : tensor<2x12xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 4]
  meg.param @up : tensor<6x8xf32> init #meg.init<normal(0.02)>
  func.func @ffn(%x: tensor<2x8xf32>) -> tensor<2x6xf32> {
    %w = meg.param_ref @up : tensor<6x8xf32>
    // expected-error @+1 {{meg-tensor-parallel: parameter @up splits dim 0 of 6 into 4 blocks, which do not divide it}}
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x8xf32>, tensor<6x8xf32>
    return %y : tensor<2x6xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 4]
  meg.param @k : tensor<12x8xf32> init #meg.init<normal(0.02)>
  func.func @heads(%x: tensor<2x8xf32>) -> tensor<2x12xf32> {
    %w = meg.param_ref @k : tensor<12x8xf32>
    // expected-error @+1 {{meg-tensor-parallel: a column-parallel layer splits its 3 groups of output features over 4 ranks, but neither divides the other}}
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column, groups = 3>} : tensor<2x8xf32>, tensor<12x8xf32>
    return %y : tensor<2x12xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.param @w : tensor<8x8xf32> init #meg.init<normal(0.02)>
  func.func @twice(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = meg.param_ref @w : tensor<8x8xf32>
    // expected-note @+1 {{the first layer}}
    %a = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{meg-tensor-parallel: parameter @w is split another way by a second layer}}
    %b = meg.linear %a, %w {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x8xf32>, tensor<8x8xf32>
    return %b : tensor<2x8xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  func.func @computed(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
    // expected-error @+1 {{meg-tensor-parallel: the weight of a tensor-parallel layer must be a meg.param_ref}}
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x8xf32>, tensor<8x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"], sequence_parallel = true>} {
  meg.mesh @world [tp = 2]
  meg.param @w : tensor<8x8xf32> init #meg.init<normal(0.02)>
  func.func @odd_sequence(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
    %w = meg.param_ref @w : tensor<8x8xf32>
    // expected-error @+1 {{meg-tensor-parallel: sequence parallelism splits dim 1 of 'tensor<2x3x8xf32>' into 2 blocks, which do not divide it}}
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x3x8xf32>, tensor<8x8xf32>
    return %y : tensor<2x3x8xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 4]
  meg.param @k : tensor<8x16xf32> init #meg.init<normal(0.02)>
  func.func @shared_block(%x: tensor<2x16xf32>) -> tensor<2x8xf32> {
    %w = meg.param_ref @k : tensor<8x16xf32>
    // expected-note @+1 {{the group's block}}
    %k = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column, groups = 2>} : tensor<2x16xf32>, tensor<8x16xf32>
    // expected-error @+1 {{meg-tensor-parallel: needs a value whole that is the block of one of 2 groups along dim 1, which ranks share: only an attention can use it}}
    return %k : tensor<2x8xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2, dp_shard = 2]
  meg.submesh @world[dp_shard]
  meg.param @w : tensor<4x8xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [8, 8], dim = 0>
  func.func @already(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
    %w = meg.param_ref @w : tensor<4x8xf32>
    // expected-error @+1 {{meg-tensor-parallel: parameter @w is sharded already}}
    %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column>} : tensor<2x8xf32>, tensor<4x8xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [tp = 2]
  meg.param @table : tensor<16x4xf32> init #meg.init<normal(0.02)>
  func.func @first_row(%ids: tensor<2xi32>, %first: tensor<i32>) -> tensor<2x4xf32> {
    %t = meg.param_ref @table : tensor<16x4xf32>
    // expected-error @+1 {{meg-tensor-parallel: a vocab-parallel embedding reads the whole table}}
    %e = meg.embedding %t, %ids rows from %first {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<16x4xf32>, tensor<2xi32>, tensor<i32>
    return %e : tensor<2x4xf32>
  }
}

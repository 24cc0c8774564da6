// Round-trip test (custom and generic form) of every meg op, attribute and type.
// RUN: megc-opt %s | megc-opt | FileCheck %s
// RUN: megc-opt %s --mlir-print-op-generic | megc-opt | FileCheck %s

// CHECK-LABEL: module attributes
// CHECK-SAME: meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["dp_shard"], outer = ["dp_outer"], outer_strategy = optim, bucket_mb = 25>
// CHECK-SAME: meg.optimizer = #meg.adamw<lr = 0.0003, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1>
// CHECK-SAME: meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = bf16, exp_avg = f32, exp_avg_sq = f16>
module attributes {
  meg.precision = #meg.precision<param = bf16, main_params = f32,
                                 main_grads = f32, grad_reduce = bf16,
                                 exp_avg = f32, exp_avg_sq = f16>,
  meg.optimizer = #meg.adamw<lr = 3.0e-4, beta1 = 0.9, beta2 = 0.95,
                             eps = 1.0e-8, weight_decay = 0.1>,
  meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world,
                       shard = ["dp_shard"], outer = ["dp_outer"],
                       outer_strategy = optim, bucket_mb = 25>
} {

// CHECK: meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
// CHECK: meg.mesh @quoted ["axis 0" = 3]
meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
meg.mesh @quoted ["axis 0" = 3]

// Axis names may be bare identifiers or strings.
// CHECK: meg.submesh @world[dp_shard]{{$}}
// CHECK: meg.submesh @world[dp_outer]{{$}}
// CHECK: meg.submesh @world[dp_outer, dp_shard]{{$}}
// CHECK: meg.submesh @quoted["axis 0"]{{$}}
meg.submesh @world[dp_shard]
meg.submesh @world[dp_outer]
meg.submesh @world["dp_outer", dp_shard]
meg.submesh @quoted["axis 0"]

// CHECK: meg.param @model.embed_tokens.weight : tensor<128x64xbf16> init #meg.init<normal(0.02)>{{$}}
// CHECK: meg.param frozen @model.norm.weight : tensor<64xbf16> init #meg.init<ones>{{$}}
// CHECK: meg.param @model.norm.bias : tensor<64xf32> init #meg.init<zeros>{{$}}
// CHECK: meg.param @lm_head.weight : tensor<2048xf32> init #meg.init<uniform(0.125)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64]>{{$}}
// CHECK: meg.param state @optimizer.main_param.lm_head.weight : tensor<2048xf32> init #meg.init<copy(@lm_head.weight)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64]>{{$}}
// CHECK: meg.param frozen @frozen.sharded : tensor<64xf16> init #meg.init<normal(0.001)> sharding #meg.sharding<mesh = @world, axes = ["dp_outer", "dp_shard"], shape = [8, 64]>{{$}}
// CHECK: meg.param @column : tensor<32x64xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64], dim = 0>{{$}}
meg.param @model.embed_tokens.weight : tensor<128x64xbf16> init #meg.init<normal(0.02)>
meg.param frozen @model.norm.weight : tensor<64xbf16> init #meg.init<ones>
meg.param @model.norm.bias : tensor<64xf32> init #meg.init<zeros>
meg.param @lm_head.weight : tensor<2048xf32> init #meg.init<uniform(0.125)>
    sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64]>
meg.param state @optimizer.main_param.lm_head.weight : tensor<2048xf32> init #meg.init<copy(@lm_head.weight)>
    sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64]>
meg.param frozen @frozen.sharded : tensor<64xf16> init #meg.init<normal(1.0e-3)>
    sharding #meg.sharding<mesh = @world, axes = ["dp_outer", "dp_shard"], shape = [8, 64]>
meg.param @column : tensor<32x64xf32> init #meg.init<normal(0.02)>
    sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [128, 64], dim = 0>
// Experts stacked into one parameter that checkpoints hold per expert.
// CHECK: meg.param @experts.up_proj.weight : tensor<1x4x8xf32> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["dp_outer"], shape = [2, 4, 8], dim = 0> parts ["experts.0.up_proj.weight", "experts.1.up_proj.weight"]{{$}}
meg.param @experts.up_proj.weight : tensor<1x4x8xf32> init #meg.init<normal(0.02)>
    sharding #meg.sharding<mesh = @world, axes = ["dp_outer"], shape = [2, 4, 8], dim = 0>
    parts ["experts.0.up_proj.weight", "experts.1.up_proj.weight"]

// FSDP defaults (no outer axes, outer_strategy no_shard, bucket_mb 40) are
// elided; a nested module can carry its own configuration.
// CHECK-LABEL: module @fsdp_defaults attributes
// CHECK-SAME: meg.fsdp = #meg.fsdp<strategy = optim, mesh = @m, shard = ["x"]>}
// CHECK: meg.mesh @m [x = 2, y = 3, z = 1]
// CHECK-LABEL: module @hsdp attributes
// CHECK-SAME: meg.fsdp = #meg.fsdp<strategy = no_shard, mesh = @m, shard = ["x"], outer = ["y", "z"]>}
module @fsdp_defaults attributes {
  meg.fsdp = #meg.fsdp<strategy = optim, mesh = @m, shard = ["x"]>
} {
  meg.mesh @m [x = 2, y = 3, z = 1]
}
module @hsdp attributes {
  meg.fsdp = #meg.fsdp<strategy = no_shard, mesh = @m, shard = ["x"],
                       outer = ["y", "z"], outer_strategy = no_shard,
                       bucket_mb = 40>
} {
  meg.mesh @m [x = 2, y = 3, z = 1]
}

// Tensor parallelism: the module's group (sequence parallelism elided
// when off), and the split each layer records.
// CHECK-LABEL: module @tensor_parallel attributes
// CHECK-SAME: meg.tensor_parallel = #meg.tensor_parallel<mesh = @m, axes = ["x"], sequence_parallel = true>}
// CHECK: meg.linear %{{.*}}, %{{.*}} {meg.tp_layer = #meg.tp_layer<column, groups = 2>}
// CHECK: meg.linear %{{.*}}, %{{.*}} {meg.tp_layer = #meg.tp_layer<row>}
// CHECK: meg.embedding %{{.*}}, %{{.*}} {meg.tp_layer = #meg.tp_layer<vocab>}
// CHECK-LABEL: module @tensor_parallel_defaults attributes
// CHECK-SAME: meg.tensor_parallel = #meg.tensor_parallel<mesh = @m, axes = ["x"]>}
module @tensor_parallel attributes {
  meg.tensor_parallel = #meg.tensor_parallel<mesh = @m, axes = ["x"], sequence_parallel = true>
} {
  meg.mesh @m [x = 2]
  func.func @layers(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>, %ids: tensor<2xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
    %c = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<column, groups = 2>} : tensor<2x8xf32>, tensor<8x8xf32>
    %r = meg.linear %c, %w {meg.tp_layer = #meg.tp_layer<row>} : tensor<2x8xf32>, tensor<8x8xf32>
    %e = meg.embedding %w, %ids {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<8x8xf32>, tensor<2xi32>
    return %r, %e : tensor<2x8xf32>, tensor<2x8xf32>
  }
}
module @tensor_parallel_defaults attributes {
  meg.tensor_parallel = #meg.tensor_parallel<mesh = @m, axes = ["x"], sequence_parallel = false>
} {
  meg.mesh @m [x = 2]
}

// Entry points name their arguments and results with meg.name.
// CHECK-LABEL: func.func @entry
// CHECK-SAME: (%{{.*}}: tensor<2x16xi32> {meg.name = "input_ids"}, %{{.*}}: tensor<2x16xf32>) -> (tensor<2x16xf32> {meg.name = "logits"}, tensor<f32>)
func.func @entry(%ids: tensor<2x16xi32> {meg.name = "input_ids"},
                 %x: tensor<2x16xf32>)
    -> (tensor<2x16xf32> {meg.name = "logits"}, tensor<f32>) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %x, %c : tensor<2x16xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @params
func.func @params() -> (tensor<128x64xbf16>, tensor<64xbf16>) {
  // CHECK: meg.param_ref @model.embed_tokens.weight : tensor<128x64xbf16>
  // CHECK: meg.param_ref @model.norm.weight : tensor<64xbf16>
  %0 = meg.param_ref @model.embed_tokens.weight : tensor<128x64xbf16>
  %1 = meg.param_ref @model.norm.weight : tensor<64xbf16>
  return %0, %1 : tensor<128x64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x8x16xf32>, %b: tensor<1x16xf32>,
                       %i: tensor<4xi32>, %j: tensor<4xi32>) {
  // CHECK: meg.add %{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<1x16xf32>
  %0 = meg.add %a, %b : tensor<2x8x16xf32>, tensor<1x16xf32>
  // CHECK: meg.sub %{{.*}}, %{{.*}} : tensor<1x16xf32>, tensor<2x8x16xf32>
  %1 = meg.sub %b, %a : tensor<1x16xf32>, tensor<2x8x16xf32>
  // CHECK: meg.mul %{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<2x8x16xf32>
  %2 = meg.mul %0, %1 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
  // CHECK: meg.div %{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<1x16xf32>
  %3 = meg.div %2, %b : tensor<2x8x16xf32>, tensor<1x16xf32>
  // CHECK: meg.max %{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>
  %4 = meg.max %i, %j : tensor<4xi32>, tensor<4xi32>
  // CHECK: meg.neg %{{.*}} : tensor<2x8x16xf32>
  %5 = meg.neg %3 : tensor<2x8x16xf32>
  // CHECK: meg.exp %{{.*}} : tensor<2x8x16xf32>
  %6 = meg.exp %5 : tensor<2x8x16xf32>
  // CHECK: meg.log %{{.*}} : tensor<2x8x16xf32>
  %7 = meg.log %6 : tensor<2x8x16xf32>
  // CHECK: meg.cos %{{.*}} : tensor<2x8x16xf32>
  %8 = meg.cos %7 : tensor<2x8x16xf32>
  // CHECK: meg.sin %{{.*}} : tensor<2x8x16xf32>
  %9 = meg.sin %8 : tensor<2x8x16xf32>
  // CHECK: meg.sqrt %{{.*}} : tensor<2x8x16xf32>
  %10 = meg.sqrt %9 : tensor<2x8x16xf32>
  // CHECK: meg.rsqrt %{{.*}} : tensor<2x8x16xf32>
  %11 = meg.rsqrt %10 : tensor<2x8x16xf32>
  // CHECK: meg.tanh %{{.*}} : tensor<2x8x16xf32>
  %12 = meg.tanh %11 : tensor<2x8x16xf32>
  // CHECK: meg.sigmoid %{{.*}} : tensor<1x16xbf16>
  %13 = meg.cast %b : tensor<1x16xf32> to tensor<1x16xbf16>
  %14 = meg.sigmoid %13 : tensor<1x16xbf16>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x4x8xf32>, %ids: tensor<2x4xi64>) {
  // CHECK: meg.cast %{{.*}} : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %0 = meg.cast %x : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  // CHECK: meg.cast %{{.*}} : tensor<2x4xi64> to tensor<2x4xf16>
  %1 = meg.cast %ids : tensor<2x4xi64> to tensor<2x4xf16>
  // CHECK: meg.reshape %{{.*}} : tensor<2x4x8xf32> to tensor<8x8xf32>
  %2 = meg.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  // CHECK: meg.transpose %{{.*}} [1, 0, 2] : tensor<2x4x8xf32>
  %3 = meg.transpose %x [1, 0, 2] : tensor<2x4x8xf32>
  // CHECK: meg.slice %{{.*}} [0, 1, 0] [2, 2, 4] [1, 2, 2] : tensor<2x4x8xf32>
  %4 = meg.slice %x [0, 1, 0] [2, 2, 4] [1, 2, 2] : tensor<2x4x8xf32>
  // CHECK: meg.concat %{{.*}}, %{{.*}} axis 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %5 = meg.concat %x, %x axis 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // CHECK: meg.concat %{{.*}} axis 0 : tensor<2x4x8xf32>{{$}}
  %6 = meg.concat %x axis 0 : tensor<2x4x8xf32>
  // CHECK: %{{.*}}:2 = meg.split %{{.*}} axis 2 sizes [3, 5] : tensor<2x4x8xf32>
  %7:2 = meg.split %x axis 2 sizes [3, 5] : tensor<2x4x8xf32>
  // CHECK: meg.iota dim 0 : tensor<16xf32>
  %8 = meg.iota dim 0 : tensor<16xf32>
  // CHECK: meg.iota dim 1 : tensor<2x16xi32>
  %9 = meg.iota dim 1 : tensor<2x16xi32>
  // CHECK: meg.broadcast %{{.*}} : tensor<4x1xf32> to tensor<3x4x8xf32>
  %10 = meg.reshape %x : tensor<2x4x8xf32> to tensor<64x1xf32>
  %11 = meg.slice %10 [0, 0] [4, 1] [16, 1] : tensor<64x1xf32>
  %12 = meg.broadcast %11 : tensor<4x1xf32> to tensor<3x4x8xf32>
  // CHECK: meg.reduce sum %{{.*}} dims [0, 1] : tensor<2x4x8xf32>
  %13 = meg.reduce sum %x dims [0, 1] : tensor<2x4x8xf32>
  // CHECK: meg.reduce mean %{{.*}} dims [2] keep_dims : tensor<2x4x8xf32>
  %14 = meg.reduce mean %x dims [2] keep_dims : tensor<2x4x8xf32>
  // CHECK: meg.reduce max %{{.*}} dims [1] : tensor<2x4x8xbf16>
  %15 = meg.reduce max %0 dims [1] : tensor<2x4x8xbf16>
  return
}

// CHECK-LABEL: func.func @nn
// CHECK-SAME: (%[[TABLE:[^:]*]]: tensor<128x64xbf16>, %[[IDS:[^:]*]]: tensor<2x16xi32>, %[[X:[^:]*]]: tensor<2x16x64xf32>, %[[W:[^:]*]]: tensor<32x64xf32>, %[[B:[^:]*]]: tensor<32xf32>, %[[NW:[^:]*]]: tensor<64xf32>, %[[NB:[^:]*]]: tensor<64xf32>
func.func @nn(%table: tensor<128x64xbf16>, %ids: tensor<2x16xi32>,
              %x: tensor<2x16x64xf32>, %w: tensor<32x64xf32>,
              %b: tensor<32xf32>, %nw: tensor<64xf32>, %nb: tensor<64xf32>,
              %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>,
              %v: tensor<2x16x2x16xf32>, %cos: tensor<20x16xf32>,
              %sin: tensor<20x16xf32>, %logits: tensor<2x16x128xf32>,
              %labels: tensor<2x16xi64>, %shift: tensor<2x64xf32>,
              %m: tensor<2x4x16x32xf32>, %w2: tensor<32x16xf32>) {
  // CHECK: meg.embedding %[[TABLE]], %[[IDS]] : tensor<128x64xbf16>, tensor<2x16xi32>
  %0 = meg.embedding %table, %ids : tensor<128x64xbf16>, tensor<2x16xi32>
  // CHECK: %[[FIRST:.*]] = arith.constant dense<128> : tensor<i32>
  // CHECK: meg.embedding %[[TABLE]], %[[IDS]] rows from %[[FIRST]] : tensor<128x64xbf16>, tensor<2x16xi32>, tensor<i32>
  %first = arith.constant dense<128> : tensor<i32>
  %e1 = meg.embedding %table, %ids rows from %first : tensor<128x64xbf16>, tensor<2x16xi32>, tensor<i32>
  // CHECK: meg.embedding_grad %{{.*}}, %[[IDS]] rows from %[[FIRST]] : tensor<2x16x64xbf16>, tensor<2x16xi32>, tensor<i32> -> tensor<128x64xbf16>
  %e2 = meg.embedding_grad %e1, %ids rows from %first : tensor<2x16x64xbf16>, tensor<2x16xi32>, tensor<i32> -> tensor<128x64xbf16>
  // CHECK: meg.matmul %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64x32xf32>
  %wt = meg.transpose %w [1, 0] : tensor<32x64xf32>
  %1 = meg.matmul %x, %wt : tensor<2x16x64xf32>, tensor<64x32xf32>
  // CHECK: meg.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  %2 = meg.matmul %m, %m transpose_rhs : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  // CHECK: meg.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  %3 = meg.matmul %m, %m transpose_lhs : tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>
  // CHECK: meg.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<2x16x64xf32>, tensor<32x16xf32>
  %4 = meg.matmul %x, %w2 transpose_lhs transpose_rhs : tensor<2x16x64xf32>, tensor<32x16xf32>
  // CHECK: meg.linear %[[X]], %[[W]] : tensor<2x16x64xf32>, tensor<32x64xf32>{{$}}
  %5 = meg.linear %x, %w : tensor<2x16x64xf32>, tensor<32x64xf32>
  // CHECK: meg.linear %[[X]], %[[W]] bias %[[B]] : tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32xf32>
  %6 = meg.linear %x, %w bias %b : tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32xf32>
  // CHECK: meg.rms_norm %[[X]], %[[NW]] eps 1.000000e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %7 = meg.rms_norm %x, %nw eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: meg.layer_norm %[[X]] eps 1.000000e-03 : tensor<2x16x64xf32>{{$}}
  %8 = meg.layer_norm %x eps 1.0e-03 : tensor<2x16x64xf32>
  // CHECK: meg.layer_norm %[[X]] affine %[[NW]], %[[NB]] eps 1.000000e-05 : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  %9 = meg.layer_norm %x affine %nw, %nb eps 1.0e-05
      : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK: meg.rope %{{.*}}, %{{.*}}, %{{.*}} layout bshd : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  %10 = meg.rope %q, %cos, %sin layout bshd
      : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  // CHECK: meg.rope %{{.*}}, %{{.*}}, %{{.*}} layout sbhd interleaved : tensor<2x4x16x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  %11 = meg.rope %m, %cos, %sin layout sbhd interleaved
      : tensor<2x4x16x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  // CHECK: meg.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale 1.250000e-01 : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  %12 = meg.attention %q, %k, %v causal scale 0.125
      : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  // CHECK: meg.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
  %13 = meg.attention %q, %k, %k scale 1.0
      : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
  // The softmax statistics, [batch, heads, seq_q] f32, as a second result.
  // CHECK: %{{.*}}, %[[LSE:.*]] = meg.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale 1.250000e-01 stats : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  %o13, %lse13 = meg.attention %q, %k, %v causal scale 0.125 stats
      : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  // CHECK-NEXT: meg.reshape %[[LSE]] : tensor<2x4x16xf32> to tensor<128xf32>
  %lse13r = meg.reshape %lse13 : tensor<2x4x16xf32> to tensor<128xf32>
  // CHECK: meg.gelu %{{.*}} approximate tanh : tensor<2x16x64xf32>
  %14 = meg.gelu %x approximate tanh : tensor<2x16x64xf32>
  // CHECK: meg.gelu %{{.*}} approximate none : tensor<2x16x64xf32>
  %15 = meg.gelu %x approximate none : tensor<2x16x64xf32>
  // CHECK: meg.silu %{{.*}} : tensor<2x16x64xf32>
  %16 = meg.silu %x : tensor<2x16x64xf32>
  // CHECK: meg.swiglu %{{.*}}, %{{.*}} : tensor<2x16x64xf32>
  %17 = meg.swiglu %x, %x : tensor<2x16x64xf32>
  // CHECK: meg.softmax %{{.*}} axis 2 : tensor<2x16x64xf32>
  %18 = meg.softmax %x axis 2 : tensor<2x16x64xf32>
  // CHECK: meg.cross_entropy %{{.*}}, %{{.*}} mean : tensor<2x16x128xf32>, tensor<2x16xi64>
  %19 = meg.cross_entropy %logits, %labels mean : tensor<2x16x128xf32>, tensor<2x16xi64>
  // CHECK: meg.cross_entropy %{{.*}}, %{{.*}} sum : tensor<2x16x128xf32>, tensor<2x16xi64>
  %20 = meg.cross_entropy %logits, %labels sum : tensor<2x16x128xf32>, tensor<2x16xi64>
  // CHECK: meg.cross_entropy %{{.*}}, %{{.*}} sum ignore -100 : tensor<2x16x128xf32>, tensor<2x16xi64>
  %s = meg.cross_entropy %logits, %labels sum ignore -100 : tensor<2x16x128xf32>, tensor<2x16xi64>
  // CHECK: meg.label_count %{{.*}} ignore -100 global : tensor<2x16xi64>
  %n = meg.label_count %labels ignore -100 global : tensor<2x16xi64>
  // CHECK: %[[MAX:.*]] = meg.stop_gradient %{{.*}} : tensor<2x16xf32>
  // CHECK: meg.vocab_shard_stats %{{.*}}, %[[MAX]], %{{.*}}, %[[FIRST]] vocab 256 ignore -100 : tensor<2x16x128xf32>, tensor<2x16xf32>, tensor<2x16xi64>, tensor<i32>
  // CHECK: meg.vocab_shard_stats_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[MAX]], %{{.*}}, %[[FIRST]] : tensor<2x16xf32>, tensor<2x16x128xf32>, tensor<2x16xi64>, tensor<i32>
  %lmax = meg.reduce max %logits dims [2] : tensor<2x16x128xf32>
  %smax = meg.stop_gradient %lmax : tensor<2x16xf32>
  %se, %tg, %mk = meg.vocab_shard_stats %logits, %smax, %labels, %first vocab 256 ignore -100 : tensor<2x16x128xf32>, tensor<2x16xf32>, tensor<2x16xi64>, tensor<i32>
  %dl = meg.vocab_shard_stats_grad %se, %tg, %logits, %smax, %labels, %first : tensor<2x16xf32>, tensor<2x16x128xf32>, tensor<2x16xi64>, tensor<i32>
  // CHECK: meg.label_count %{{.*}} ignore 0 : tensor<2x16xi64>
  %n0 = meg.label_count %labels ignore 0 : tensor<2x16xi64>
  // CHECK: meg.modulate %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<2x64xf32>, tensor<2x64xf32>
  %21 = meg.modulate %x, %shift, %shift
      : tensor<2x16x64xf32>, tensor<2x64xf32>, tensor<2x64xf32>
  return
}

// CHECK-LABEL: func.func @grads
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x16x64xf32>, %{{[^:]*}}: tensor<2x16xi32>, %[[X:[^:]*]]: tensor<2x16x64xf32>, %[[NW:[^:]*]]: tensor<64xf32>
func.func @grads(%dy: tensor<2x16x64xf32>, %ids: tensor<2x16xi32>,
                 %x: tensor<2x16x64xf32>, %nw: tensor<64xf32>,
                 %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>,
                 %v: tensor<2x16x2x16xf32>, %o: tensor<2x16x4x16xf32>,
                 %cos: tensor<20x16xf32>, %sin: tensor<20x16xf32>,
                 %dloss: tensor<f32>, %logits: tensor<2x16x128xf32>,
                 %labels: tensor<2x16xi32>, %lse: tensor<2x4x16xf32>) {
  // CHECK: meg.embedding_grad %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<128x64xf32>
  %0 = meg.embedding_grad %dy, %ids
      : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<128x64xf32>
  // CHECK: %{{.*}}, %{{.*}} = meg.rms_norm_grad %[[DY]], %[[X]], %[[NW]] eps 1.000000e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %1:2 = meg.rms_norm_grad %dy, %x, %nw eps 1.0e-05
      : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: %{{[^:]*}} = meg.layer_norm_grad %[[DY]], %[[X]] eps 1.000000e-03 : tensor<2x16x64xf32>{{$}}
  %2 = meg.layer_norm_grad %dy, %x eps 1.0e-03 : tensor<2x16x64xf32>
  // CHECK: %{{.*}}:3 = meg.layer_norm_grad %[[DY]], %[[X]] weight %[[NW]] eps 1.000000e-05 : tensor<2x16x64xf32>, tensor<64xf32>
  %3:3 = meg.layer_norm_grad %dy, %x weight %nw eps 1.0e-05
      : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: meg.rope_grad %{{.*}}, %{{.*}}, %{{.*}} layout bshd : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  %4 = meg.rope_grad %q, %cos, %sin layout bshd
      : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  // CHECK: meg.rope_grad %{{.*}}, %{{.*}}, %{{.*}} layout sbhd interleaved : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  %5 = meg.rope_grad %q, %cos, %sin layout sbhd interleaved
      : tensor<2x16x4x32xf32>, tensor<20x16xf32>, tensor<20x16xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = meg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 1.250000e-01 : tensor<2x16x4x16xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  %6:3 = meg.attention_grad %o, %q, %k, %v, %o causal scale 0.125
      : tensor<2x16x4x16xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>,
        tensor<2x16x2x16xf32>
  // CHECK: meg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e+00 :
  %7:3 = meg.attention_grad %o, %q, %k, %v, %o scale 2.5
      : tensor<2x16x4x16xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>,
        tensor<2x16x2x16xf32>
  // CHECK: meg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} stats %{{.*}} causal scale 1.250000e-01 : tensor<2x16x4x16xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>, tensor<2x4x16xf32>
  %g7:3 = meg.attention_grad %o, %q, %k, %v, %o stats %lse causal scale 0.125
      : tensor<2x16x4x16xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>,
        tensor<2x16x2x16xf32>, tensor<2x4x16xf32>
  // CHECK: meg.softmax_grad %[[DY]], %[[X]] axis 1 : tensor<2x16x64xf32>
  %8 = meg.softmax_grad %dy, %x axis 1 : tensor<2x16x64xf32>
  // CHECK: meg.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} mean : tensor<2x16x128xf32>, tensor<2x16xi32>
  %9 = meg.cross_entropy_grad %dloss, %logits, %labels mean
      : tensor<2x16x128xf32>, tensor<2x16xi32>
  // CHECK: meg.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} sum ignore -100 : tensor<2x16x128xf32>, tensor<2x16xi32>
  %ceg = meg.cross_entropy_grad %dloss, %logits, %labels sum ignore -100
      : tensor<2x16x128xf32>, tensor<2x16xi32>
  // CHECK: meg.gelu_grad %[[DY]], %[[X]] approximate tanh : tensor<2x16x64xf32>
  %10 = meg.gelu_grad %dy, %x approximate tanh : tensor<2x16x64xf32>
  // CHECK: meg.silu_grad %[[DY]], %[[X]] : tensor<2x16x64xf32>
  %11 = meg.silu_grad %dy, %x : tensor<2x16x64xf32>
  // CHECK: %{{.*}}, %{{.*}} = meg.swiglu_grad %[[DY]], %[[X]], %[[X]] : tensor<2x16x64xf32>
  %12:2 = meg.swiglu_grad %dy, %x, %x : tensor<2x16x64xf32>
  return
}

// The config attribute of meg.adamw is written in full inside `config(...)`;
// parameter, gradient and moment dtypes follow the module's precision
// policy (main_params = f32, main_grads = f32, exp_avg = f32,
// exp_avg_sq = f16).
// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%p: tensor<8x4xf32>, %g: tensor<8x4xf32>,
                     %m: tensor<8x4xf32>, %v: tensor<8x4xf16>,
                     %step: tensor<i64>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = meg.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} config(#meg.adamw<lr = 0.001, beta1 = 0.0, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>) : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf16>, tensor<i64>
  %0:3 = meg.adamw %p, %g, %m, %v, %step
      config(#meg.adamw<lr = 1.0e-3, beta1 = 0.0, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>)
      : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf16>,
        tensor<i64>
  return
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%s: tensor<4x8xbf16>, %g: tensor<16x8xf32>,
                       %i: tensor<4x8xi64>) {
  // CHECK: meg.all_gather %{{.*}} over @world[dp_shard] dim 0 : tensor<4x8xbf16> -> tensor<16x8xbf16>
  %0 = meg.all_gather %s over @world[dp_shard] dim 0
      : tensor<4x8xbf16> -> tensor<16x8xbf16>
  // CHECK: meg.all_gather %{{.*}} over @world[dp_outer, dp_shard] dim 1 : tensor<4x8xi64> -> tensor<4x64xi64>
  %1 = meg.all_gather %i over @world[dp_outer, dp_shard] dim 1
      : tensor<4x8xi64> -> tensor<4x64xi64>
  // CHECK: meg.reduce_scatter %{{.*}} over @world[dp_shard] dim 0 avg : tensor<16x8xf32> -> tensor<4x8xf32>
  %2 = meg.reduce_scatter %g over @world[dp_shard] dim 0 avg
      : tensor<16x8xf32> -> tensor<4x8xf32>
  // CHECK: meg.all_reduce %{{.*}} over @world[dp_outer] sum : tensor<16x8xf32>
  %3 = meg.all_reduce %g over @world[dp_outer] sum : tensor<16x8xf32>
  // CHECK: meg.copy_to_group %{{.*}} over @world[dp_outer] : tensor<16x8xf32>
  %c = meg.copy_to_group %g over @world[dp_outer] : tensor<16x8xf32>
  // CHECK: meg.all_to_all %{{.*}} over @world[dp_shard] : tensor<16x8xf32>
  %x = meg.all_to_all %g over @world[dp_shard] : tensor<16x8xf32>
  // CHECK: meg.shift %{{.*}} over @world[dp_shard] by -1 : tensor<16x8xf32>
  %sh = meg.shift %g over @world[dp_shard] by -1 : tensor<16x8xf32>
  // CHECK: %[[RO:.*]] = meg.ring_attention %[[RQ:.*]], %[[RK:.*]], %[[RK]] over @world[dp_shard] scale 2.500000e-01 : tensor<1x16x2x8xf32>, tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>
  // CHECK: meg.ring_attention_grad %[[RO]], %[[RQ]], %[[RK]], %[[RK]], %[[RO]] over @world[dp_shard] scale 2.500000e-01 : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>
  %rq = meg.reshape %g : tensor<16x8xf32> to tensor<1x16x1x8xf32>
  %rq2 = meg.concat %rq, %rq axis 2 : tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>
  %ro = meg.ring_attention %rq2, %rq, %rq over @world[dp_shard] scale 0.25
      : tensor<1x16x2x8xf32>, tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>
  %rdq, %rdk, %rdv = meg.ring_attention_grad %ro, %rq2, %rq, %rq, %ro
      over @world[dp_shard] scale 0.25 : tensor<1x16x2x8xf32>,
      tensor<1x16x2x8xf32>, tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>
  // CHECK: %[[FX:.*]] = meg.all_to_all_start %{{.*}} over @world[dp_shard] : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  // CHECK: meg.wait %[[FX]] : !meg.future<tensor<16x8xf32>>
  %fx = meg.all_to_all_start %g over @world[dp_shard]
      : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  %wx = meg.wait %fx : !meg.future<tensor<16x8xf32>>
  // CHECK: %[[FS:.*]] = meg.shift_start %{{.*}} over @world[dp_shard] by 1 : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  // CHECK: meg.wait %[[FS]] : !meg.future<tensor<16x8xf32>>
  %fs = meg.shift_start %g over @world[dp_shard] by 1
      : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  %ws = meg.wait %fs : !meg.future<tensor<16x8xf32>>
  // CHECK: %[[F0:.*]] = meg.all_gather_start %{{.*}} over @world[dp_shard] dim 1 : tensor<4x8xbf16> -> !meg.future<tensor<4x32xbf16>>
  // CHECK: meg.wait %[[F0]] : !meg.future<tensor<4x32xbf16>>
  %4 = meg.all_gather_start %s over @world[dp_shard] dim 1
      : tensor<4x8xbf16> -> !meg.future<tensor<4x32xbf16>>
  %5 = meg.wait %4 : !meg.future<tensor<4x32xbf16>>
  // CHECK: %[[F1:.*]] = meg.reduce_scatter_start %{{.*}} over @world[dp_shard] dim 0 sum : tensor<16x8xf32> -> !meg.future<tensor<4x8xf32>>
  // CHECK: meg.wait %[[F1]] : !meg.future<tensor<4x8xf32>>
  %6 = meg.reduce_scatter_start %g over @world[dp_shard] dim 0 sum
      : tensor<16x8xf32> -> !meg.future<tensor<4x8xf32>>
  %7 = meg.wait %6 : !meg.future<tensor<4x8xf32>>
  // CHECK: %[[F2:.*]] = meg.all_reduce_start %{{.*}} over @world[dp_outer] avg : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  // CHECK: meg.wait %[[F2]] : !meg.future<tensor<16x8xf32>>
  %8 = meg.all_reduce_start %g over @world[dp_outer] avg
      : tensor<16x8xf32> -> !meg.future<tensor<16x8xf32>>
  %9 = meg.wait %8 : !meg.future<tensor<16x8xf32>>
  return
}

// A group may be registered after the collectives that use it.
// CHECK-LABEL: func.func @late_registration
// CHECK: meg.all_reduce %{{.*}} over @world[tp] avg : tensor<4xf32>
// CHECK: meg.submesh @world[tp]{{$}}
func.func @late_registration(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = meg.all_reduce %x over @world[tp] avg : tensor<4xf32>
  return %0 : tensor<4xf32>
}
meg.submesh @world[tp]

// A future can be passed around like any value.
// CHECK-LABEL: func.func @future_arg
// CHECK-SAME: (%[[F:.*]]: !meg.future<tensor<2xf16>>) -> tensor<2xf16>
// CHECK: meg.wait %[[F]] : !meg.future<tensor<2xf16>>
func.func @future_arg(%f: !meg.future<tensor<2xf16>>) -> tensor<2xf16> {
  %0 = meg.wait %f : !meg.future<tensor<2xf16>>
  return %0 : tensor<2xf16>
}

// CHECK-LABEL: func.func @regions
func.func @regions(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[FUSED:.*]] = meg.fusion(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
  // CHECK-NEXT: %[[S:.*]] = meg.add %[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK-NEXT: meg.yield %[[S]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  %0 = meg.fusion (%x, %r) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %s = meg.add %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
    meg.yield %s : tensor<4x8xf32>
  }
  // CHECK: %{{.*}}:2 = meg.graph_region "layers.0.forward" share_io(%[[FUSED]]) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: ^bb0(%[[C:.*]]: tensor<4x8xf32>):
  // CHECK-NEXT: %[[Y:.*]] = meg.silu %[[C]] : tensor<4x8xf32>
  // CHECK-NEXT: meg.yield %[[Y]], %[[C]] : tensor<4x8xf32>, tensor<4x8xf32>
  %1:2 = meg.graph_region "layers.0.forward" share_io (%0)
      : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %y = meg.silu %a : tensor<4x8xf32>
    meg.yield %y, %a : tensor<4x8xf32>, tensor<4x8xf32>
  }
  // An empty meg.yield is implicit and elided.
  // CHECK: meg.graph_region "layers.1.forward" forward_only() : () -> () {
  // CHECK-NEXT: }
  meg.graph_region "layers.1.forward" forward_only () : () -> () {
    meg.yield
  }
  // CHECK: meg.graph_region "layers.2.forward" share_io forward_only() : () -> () {
  // CHECK-NEXT: }
  meg.graph_region "layers.2.forward" share_io forward_only () : () -> () {
  }
  // CHECK: meg.fusion() : () -> () {
  // CHECK-NEXT: }
  meg.fusion () : () -> () {
  }
  return %1#0, %1#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

}

// Kernel strategies and in-place updates on kernel functions, as the back
// end records them.
// The device of a module's kernels (meg.target on a module).
// CHECK-LABEL: func.func @targets
// CHECK-SAME: cpu = #meg.target<cpu, vector_bits = 512>, cuda = #meg.target<cuda, arch = "sm_100a">, family = #meg.target<cuda, arch = "sm_120f">
func.func @targets() attributes {cpu = #meg.target<cpu, vector_bits = 512>,
    cuda = #meg.target<cuda, arch = "sm_100a">,
    family = #meg.target<cuda, arch = "sm_120f">} {
  return
}

// CHECK-LABEL: func.func @kernel_strategy
// CHECK-SAME: meg.kernel_strategy = #meg.kernel_strategy<column_reduction, domain = [2, 256], tile = [1, 16], vector = 16>
func.func @kernel_strategy(%x: memref<4xf32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<column_reduction, domain = [2, 256], tile = [1, 16], vector = 16>} {
  return
}
// CHECK-LABEL: func.func @serial_strategy
// CHECK-SAME: meg.in_place = array<i64: 0>, meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [], tile = [], vector = 4>
func.func @serial_strategy(%x: tensor<4xf32>) -> tensor<4xf32> attributes {
    meg.in_place = array<i64: 0>,
    meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [], tile = [], vector = 4>} {
  return %x : tensor<4xf32>
}

// Mixture-of-experts routing, capacity slots and row gathers.
// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<8x16xf32>, %s: tensor<8x4xf32>, %b: tensor<4xf32>,
               %dw: tensor<8x2xf32>) -> (tensor<4x4x16xf32>, tensor<8x4xf32>, tensor<i32>) {
  // CHECK: %{{.*}}, %{{.*}} = meg.moe_route %{{.*}}, %{{.*}} top_k 2 groups 2 top_groups 1 normalize scaling 2.500000e+00 : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  %e, %w = meg.moe_route %s, %b top_k 2 groups 2 top_groups 1 normalize
      scaling 2.5 : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  // CHECK: meg.moe_assign %{{.*}}, %{{.*}} experts 4 capacity 4 policy position : tensor<8x2xi32>, tensor<8x2xf32> -> tensor<4x4xi32>, tensor<4x4xi32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i32>
  %t, %c, %p, %l, %d = meg.moe_assign %e, %w experts 4 capacity 4 policy position
      : tensor<8x2xi32>, tensor<8x2xf32> -> tensor<4x4xi32>, tensor<4x4xi32>,
        tensor<8x2xi32>, tensor<4xi32>, tensor<i32>
  // CHECK: meg.gather_rows %{{.*}}, %{{.*}} inverse %{{.*}} : tensor<8x16xf32>, tensor<4x4xi32>, tensor<8x2xi32> -> tensor<4x4x16xf32>
  %g = meg.gather_rows %x, %t inverse %p
      : tensor<8x16xf32>, tensor<4x4xi32>, tensor<8x2xi32> -> tensor<4x4x16xf32>
  // CHECK: meg.moe_route_grad %{{.*}}, %{{.*}}, %{{.*}} scaling 1.000000e+00 : tensor<8x2xf32>, tensor<8x4xf32>, tensor<8x2xi32> -> tensor<8x4xf32>
  %ds = meg.moe_route_grad %dw, %s, %e scaling 1.0
      : tensor<8x2xf32>, tensor<8x4xf32>, tensor<8x2xi32> -> tensor<8x4xf32>
  return %g, %ds, %d : tensor<4x4x16xf32>, tensor<8x4xf32>, tensor<i32>
}

// The load-balancing bias update and a sum over the data-parallel ranks.
// CHECK-LABEL: func.func @bias_update
// CHECK: %[[TOTAL:.*]] = meg.data_sum %{{.*}} : tensor<4xf32>
// CHECK: meg.expert_bias_update @routing_bias, %[[TOTAL]] rate 1.000000e-03 : tensor<4xf32>
meg.param frozen @routing_bias : tensor<4xf32> init #meg.init<zeros>
func.func @bias_update(%load: tensor<4xf32>) {
  %total = meg.data_sum %load : tensor<4xf32>
  meg.expert_bias_update @routing_bias, %total rate 1.0e-3 : tensor<4xf32>
  return
}

// Query positions: a context-parallel rank's 8 queries (two chunks of a
// sequence of 16) against all 16 keys, and its gradient.
// CHECK-LABEL: func.func @attention_positions
// CHECK: %[[O:.*]] = meg.attention %{{.*}}, %{{.*}}, %{{.*}} causal positions(%[[P:.*]] : tensor<8xi32>) scale 1.250000e-01 : tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
// CHECK: meg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[O]] causal positions(%[[P]] : tensor<8xi32>) scale 1.250000e-01 : tensor<1x8x4x32xf32>, tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
func.func @attention_positions(%q: tensor<1x8x4x32xf32>, %k: tensor<1x16x2x32xf32>, %pos: tensor<8xi32>) {
  %o = meg.attention %q, %k, %k causal positions(%pos : tensor<8xi32>)
      scale 0.125
      : tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
  %g:3 = meg.attention_grad %o, %q, %k, %k, %o causal
      positions(%pos : tensor<8xi32>) scale 0.125
      : tensor<1x8x4x32xf32>, tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>,
        tensor<1x16x2x32xf32>
  return
}

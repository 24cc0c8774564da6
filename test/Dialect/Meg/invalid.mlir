// Every verifier and type-inference diagnostic of the meg dialect.
// RUN: megc-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// #meg.init
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown init kind 'gaussian'; expected zeros, ones, normal, uniform or copy}}
meg.param @p : tensor<4xf32> init #meg.init<gaussian(0.02)>

// -----

// expected-error @+1 {{'meg.param' op is initialised as a copy of @missing, which is not a meg.param}}
meg.param @p : tensor<4xf32> init #meg.init<copy(@missing)>

// -----

meg.param @w : tensor<4x2xbf16> init #meg.init<ones>
// expected-error @+1 {{'meg.param' op is initialised as a copy of @w of shape [4, 2], but has shape [4]}}
meg.param @p : tensor<4xf32> init #meg.init<copy(@w)>

// -----

meg.param @w : tensor<4xbf16> init #meg.init<ones>
meg.param @m : tensor<4xf32> init #meg.init<copy(@w)>
// expected-error @+1 {{'meg.param' op copies @m, which is itself a copy}}
meg.param @p : tensor<4xf32> init #meg.init<copy(@m)>

// -----

// expected-error @+1 {{expects the normal init scale in [0, 1000], got -5.000000e-01}}
meg.param @p : tensor<4xf32> init #meg.init<normal(-0.5)>

// -----

// expected-error @+1 {{expects the uniform init scale in [0, 1000], got -1.000000e+00}}
meg.param @p : tensor<4xf32> init #meg.init<uniform(-1.0)>

// -----

//===----------------------------------------------------------------------===//
// #meg.sharding
//===----------------------------------------------------------------------===//

meg.mesh @world [dp = 2]
// expected-error @+1 {{expects positive extents in the full shape, got 0}}
meg.param @p : tensor<4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp"], shape = [0, 8]>

// -----

meg.mesh @world [dp = 2]
// expected-error @+1 {{expects at least one sharding axis}}
meg.param @p : tensor<4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = [], shape = [8]>

// -----

meg.mesh @world [dp = 2]
// expected-error @+1 {{expects sharding axes to be non-empty strings, got ""}}
meg.param @p : tensor<4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = [""], shape = [8]>

// -----

meg.mesh @world [dp = 2]
// expected-error @+1 {{expects sharding axes to be non-empty strings, got 1 : i64}}
meg.param @p : tensor<4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = [1], shape = [8]>

// -----

meg.mesh @world [dp = 2]
// expected-error @+1 {{sharding axis 'dp' appears twice}}
meg.param @p : tensor<4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp", "dp"], shape = [8]>

// -----

//===----------------------------------------------------------------------===//
// #meg.tensor_parallel, #meg.tp_layer
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expects at least one tensor_parallel axis}}
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = []>} {}

// -----

// expected-error @+1 {{'meg.tensor_parallel' tensor_parallel axis 'tp' is not an axis of mesh @world}}
module attributes {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>} {
  meg.mesh @world [dp_shard = 2]
}

// -----

module {
  meg.mesh @world [tp = 2]
  // expected-error @+1 {{'meg.tensor_parallel' is only valid on a builtin.module}}
  meg.submesh @world[tp] {meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, axes = ["tp"]>}
}

// -----

func.func @row_embedding(%w: tensor<8x4xf32>, %ids: tensor<2xi32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'meg.tp_layer' row applies to a meg.linear}}
  %e = meg.embedding %w, %ids {meg.tp_layer = #meg.tp_layer<row>} : tensor<8x4xf32>, tensor<2xi32>
  return %e : tensor<2x4xf32>
}

// -----

func.func @vocab_linear(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'meg.tp_layer' vocab applies to a meg.embedding}}
  %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<vocab>} : tensor<2x4xf32>, tensor<8x4xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @row_groups(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{tp_layer groups apply to column layers only}}
  %y = meg.linear %x, %w {meg.tp_layer = #meg.tp_layer<row, groups = 2>} : tensor<2x4xf32>, tensor<8x4xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @not_a_split(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'meg.tp_layer' expects a #meg.tp_layer attribute}}
  %y = meg.linear %x, %w {meg.tp_layer = 1 : i64} : tensor<2x4xf32>, tensor<8x4xf32>
  return %y : tensor<2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// #meg.fsdp
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expects at least one shard axis}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = []>} {}

// -----

// expected-error @+1 {{expects shard axes to be non-empty strings, got ""}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = [""]>} {}

// -----

// expected-error @+1 {{shard axis 'x' appears twice}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x", "x"]>} {}

// -----

// expected-error @+1 {{expects at least one outer axis}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], outer = []>} {}

// -----

// expected-error @+1 {{expects outer axes to be non-empty strings, got 2 : i64}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], outer = [2]>} {}

// -----

// expected-error @+1 {{outer axis 'y' appears twice}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], outer = ["y", "y"]>} {}

// -----

// expected-error @+1 {{axis "x" is both a shard and an outer axis}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], outer = ["y", "x"]>} {}

// -----

// expected-error @+1 {{expects outer_strategy no_shard or optim, got optim_grads}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["x"], outer = ["y"], outer_strategy = optim_grads>} {}

// -----

// expected-error @+1 {{outer_strategy optim needs outer axes}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim_grads_params, mesh = @world, shard = ["x"], outer_strategy = optim>} {}

// -----

// expected-error @+1 {{outer_strategy optim requires strategy optim_grads_params, got optim_grads}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim_grads, mesh = @world, shard = ["x"], outer = ["y"], outer_strategy = optim>} {}

// -----

// expected-error @+1 {{expects bucket_mb > 0, got 0}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], bucket_mb = 0>} {}

// -----

//===----------------------------------------------------------------------===//
// #meg.precision
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expects param to be one of f32, bf16, f16, got 'f64'}}
module attributes {meg.precision = #meg.precision<param = f64, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {}

// -----

// expected-error @+1 {{expects main_params to be one of f32, f16, got 'bf16'}}
module attributes {meg.precision = #meg.precision<param = bf16, main_params = bf16, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {}

// -----

// expected-error @+1 {{expects main_grads to be one of f32, bf16, got 'f16'}}
module attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f16, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {}

// -----

// expected-error @+1 {{expects grad_reduce to be one of f32, bf16, got 'i32'}}
module attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = i32, exp_avg = f32, exp_avg_sq = f32>} {}

// -----

// expected-error @+1 {{expects exp_avg to be one of f32, bf16, f16, got 'tensor<2xf32>'}}
module attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = tensor<2xf32>, exp_avg_sq = f32>} {}

// -----

// expected-error @+1 {{expects exp_avg_sq to be one of f32, bf16, f16, got 'f8E4M3FN'}}
module attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f8E4M3FN>} {}

// -----

//===----------------------------------------------------------------------===//
// #meg.adamw
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expects lr > 0 (that f32 can hold), got 0.000000e+00}}
module attributes {meg.optimizer = #meg.adamw<lr = 0.0, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {}

// -----

// expected-error @+1 {{expects beta1 in [0, 1), got 1.000000e+00}}
module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 1.0, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {}

// -----

// expected-error @+1 {{expects beta2 in [0, 1), got -5.000000e-01}}
module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = -0.5, eps = 1.0e-8, weight_decay = 0.1>} {}

// -----

// expected-error @+1 {{expects eps > 0 (that f32 can hold), got 0.000000e+00}}
module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 0.0, weight_decay = 0.1>} {}

// -----

// expected-error @+1 {{expects weight_decay >= 0 (that f32 can hold), got -1.000000e-01}}
module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = -0.1>} {}

// -----

// A decay f32 cannot hold would make the update infinite.
// expected-error @+1 {{expects weight_decay >= 0 (that f32 can hold), got 1.000000e+300}}
module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 1.0e300>} {}

// -----

//===----------------------------------------------------------------------===//
// Module attributes (MegDialect::verifyOperationAttribute)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'meg.precision' expects a #meg.precision attribute}}
module attributes {meg.precision = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {}

// -----

// expected-error @+1 {{'meg.optimizer' expects an optimizer attribute such as #meg.adamw}}
module attributes {meg.optimizer = "adamw"} {}

// -----

// expected-error @+1 {{'meg.fsdp' expects a #meg.fsdp attribute}}
module attributes {meg.fsdp = 1 : i64} {}

// -----

// expected-error @+1 {{'meg.precision' is only valid on a builtin.module}}
func.func @f() attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = f32, grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>} {
  return
}

// -----

// expected-error @+1 {{'meg.optimizer' is only valid on a builtin.module}}
func.func @f() attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {
  return
}

// -----

meg.mesh @world [x = 2]
// expected-error @+1 {{'meg.fsdp' is only valid on a builtin.module}}
func.func @f() attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"]>} {
  return
}

// -----

// expected-error @+1 {{'meg.fsdp' refers to mesh @world, which is not a meg.mesh}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"]>} {
  func.func @world() {
    return
  }
}

// -----

// expected-error @+1 {{'meg.fsdp' shard axis 'tp' is not an axis of mesh @world}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["tp"]>} {
  meg.mesh @world [x = 2, y = 2]
}

// -----

// expected-error @+1 {{'meg.fsdp' outer axis 'tp' is not an axis of mesh @world}}
module attributes {meg.fsdp = #meg.fsdp<strategy = optim, mesh = @world, shard = ["x"], outer = ["y", "tp"]>} {
  meg.mesh @world [x = 2, y = 2]
}

// -----

// expected-error @+1 {{unknown meg attribute 'meg.learning_rate'}}
module attributes {meg.learning_rate = 1.0e-3 : f64} {}

// -----

// expected-error @+1 {{unknown meg attribute 'meg.mesh'}}
func.func @f() attributes {meg.mesh = @world} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// meg.name on function arguments and results
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'meg.name' on argument 0 expects a non-empty string}}
func.func @f(%a: tensor<2xi32> {meg.name = ""}) {
  return
}

// -----

// expected-error @+1 {{'meg.name' on result 1 expects a non-empty string}}
func.func @f(%a: tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32> {meg.name = 3 : i64}) {
  return %a, %a : tensor<2xi32>, tensor<2xi32>
}

// -----

// expected-error @+1 {{unknown meg attribute 'meg.label' on argument 1}}
func.func @f(%a: tensor<2xi32>, %b: tensor<2xi32> {meg.label = "x"}) {
  return
}

// -----

// expected-error @+1 {{unknown meg attribute 'meg.precision' on result 0}}
func.func private @decl(tensor<2xi32>) -> (tensor<2xi32> {meg.precision = "bf16"})

// -----

// meg.name is not an operation attribute.
// expected-error @+1 {{unknown meg attribute 'meg.name'}}
func.func @f() attributes {meg.name = "step"} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// meg.param
//===----------------------------------------------------------------------===//

meg.mesh @world [dp = 2]
// expected-error @+1 {{'meg.param' op is sharded, so its type must be the 1-D piece of one rank, got 'tensor<4x4xf32>'}}
meg.param @p : tensor<4x4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp"], shape = [8, 4]>

// -----

meg.mesh @world [tp = 2]
// expected-error @+1 {{dim 2 is out of range for a 2-d shape}}
meg.param @p : tensor<8x4xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [8, 8], dim = 2>

// -----

meg.mesh @world [tp = 2]
// expected-error @+1 {{'meg.param' op is a block of a [8, 8] tensor, so its type must have that rank, got 'tensor<32xf32>'}}
meg.param @p : tensor<32xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [8, 8], dim = 0>

// -----

meg.mesh @world [tp = 3]
// expected-error @+1 {{'meg.param' op splits dim 1 of a [8, 8] tensor over 3 ranks, which does not divide it}}
meg.param @p : tensor<8x3xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [8, 8], dim = 1>

// -----

meg.mesh @world [tp = 2]
// expected-error @+1 {{'meg.param' op is one of 2 blocks along dim 1 of a [8, 8] tensor, so its shape must be [8, 4], got [4, 8]}}
meg.param @p : tensor<4x8xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["tp"], shape = [8, 8], dim = 1>

// -----

meg.mesh @world [dp = 4]
// expected-error @+1 {{'meg.param' op holds 2 elements per rank of a [3, 3] tensor (9 elements) over 4 ranks; at least 3 are needed}}
meg.param @p : tensor<2xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp"], shape = [3, 3]>

// -----

// expected-error @+1 {{'meg.param' op is sharded over @world, which is not a meg.mesh}}
meg.param @p : tensor<8xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp"], shape = [4, 4]>

// -----

meg.mesh @world [dp = 2]
// expected-error @+1 {{'meg.param' op is sharded over axis "tp", which mesh @world does not have}}
meg.param @p : tensor<8xf32> init #meg.init<zeros> sharding #meg.sharding<mesh = @world, axes = ["dp", "tp"], shape = [4, 4]>

// -----

// expected-error @+1 {{'meg.param' op attribute 'type' failed to satisfy constraint}}
meg.param @p : tensor<4xi32> init #meg.init<zeros>

// -----

func.func @f() {
  // expected-error @+1 {{'meg.param' op expects parent op 'builtin.module'}}
  meg.param @p : tensor<4xf32> init #meg.init<zeros>
  return
}

// -----

//===----------------------------------------------------------------------===//
// meg.param_ref
//===----------------------------------------------------------------------===//

func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{'meg.param_ref' op refers to @missing, which is not defined}}
  %0 = meg.param_ref @missing : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

meg.mesh @world [dp = 2]
func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{'meg.param_ref' op refers to @world, which is a 'meg.mesh', not a meg.param}}
  %0 = meg.param_ref @world : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

meg.param @p : tensor<4xbf16> init #meg.init<ones>
func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{'meg.param_ref' op result type 'tensor<4xf32>' differs from the type 'tensor<4xbf16>' of parameter @p}}
  %0 = meg.param_ref @p : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// meg.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'meg.mesh' op has 2 axis names but 1 sizes}}
"meg.mesh"() <{sym_name = "world", axis_names = ["x", "y"], axis_sizes = array<i64: 2>}> : () -> ()

// -----

// expected-error @+1 {{'meg.mesh' op expects at least one axis}}
meg.mesh @world []

// -----

// expected-error @+1 {{'meg.mesh' op has an axis with an empty name}}
meg.mesh @world [x = 2, "" = 2]

// -----

// expected-error @+1 {{'meg.mesh' op has axis 'x' twice}}
meg.mesh @world [x = 2, y = 2, x = 4]

// -----

// expected-error @+1 {{'meg.mesh' op expects axis 'y' to have size >= 1, got 0}}
meg.mesh @world [x = 2, y = 0]

// -----

// expected-error @+1 {{'meg.mesh' op has more than 1048576 ranks (the product of its axis sizes) by axis 'tp' of size 2048}}
meg.mesh @world [dp_shard = 1024, tp = 2048]

// -----

// expected-error @+1 {{'meg.mesh' op has more than 1048576 ranks (the product of its axis sizes) by axis 'dp_shard' of size 9223372036854775807}}
meg.mesh @world [dp_shard = 9223372036854775807, tp = 1]

// -----

//===----------------------------------------------------------------------===//
// meg.submesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'meg.submesh' op refers to mesh @world, which is not a meg.mesh}}
meg.submesh @world[x]

// -----

meg.param @world : tensor<4xf32> init #meg.init<zeros>
// expected-error @+1 {{'meg.submesh' op refers to mesh @world, which is not a meg.mesh}}
meg.submesh @world[x]

// -----

meg.mesh @world [x = 2]
// expected-error @+1 {{'meg.submesh' op expects at least one mesh axis}}
meg.submesh @world[]

// -----

meg.mesh @world [x = 2]
// expected-error @+1 {{'meg.submesh' op uses axis 'y', which mesh @world does not have}}
meg.submesh @world[x, y]

// -----

meg.mesh @world [x = 2, y = 2]
// expected-error @+1 {{'meg.submesh' op uses axis 'x' twice}}
meg.submesh @world[x, y, x]

// -----

meg.mesh @world [x = 2, y = 2]
meg.submesh @world[y, x]
// expected-note @+1 {{first registered here}}
meg.submesh @world[x, y]
// expected-error @+1 {{'meg.submesh' op registers @world[x, y] a second time}}
meg.submesh @world["x", "y"]

// -----

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

meg.mesh @world [dp_outer = 2, dp_shard = 4]
func.func @f(%x: tensor<4x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'meg.all_gather' op communicates over @world[dp_shard], which is not a registered submesh; registered: none}}
  %0 = meg.all_gather %x over @world[dp_shard] dim 0 : tensor<4x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

meg.mesh @world [dp_outer = 2, dp_shard = 4]
meg.submesh @world[dp_shard]
meg.submesh @world[dp_shard, dp_outer]
func.func @f(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'meg.all_reduce' op communicates over @world[dp_outer, dp_shard], which is not a registered submesh; registered: @world[dp_shard], @world[dp_shard, dp_outer]}}
  %0 = meg.all_reduce %x over @world[dp_outer, dp_shard] sum : tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

// Registrations anywhere in the module are listed, including later ones.
meg.mesh @world [dp_outer = 2, dp_shard = 4]
meg.mesh @other [dp_shard = 4]
func.func @f(%x: tensor<16x8xf32>) -> !meg.future<tensor<4x8xf32>> {
  // expected-error @+1 {{'meg.reduce_scatter_start' op communicates over @world[dp_shard], which is not a registered submesh; registered: @other[dp_shard]}}
  %0 = meg.reduce_scatter_start %x over @world[dp_shard] dim 0 sum : tensor<16x8xf32> -> !meg.future<tensor<4x8xf32>>
  return %0 : !meg.future<tensor<4x8xf32>>
}
meg.submesh @other[dp_shard]

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'meg.all_gather' op refers to mesh @world, which is not a meg.mesh}}
  %0 = meg.all_gather %x over @world[dp_shard] dim 0 : tensor<4x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<4x8xf32>> {
  // expected-error @+1 {{'meg.all_reduce_start' op expects at least one mesh axis}}
  %0 = meg.all_reduce_start %x over @world[] avg : tensor<4x8xf32> -> !meg.future<tensor<4x8xf32>>
  return %0 : !meg.future<tensor<4x8xf32>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<16x8xf32>> {
  // expected-error @+1 {{'meg.all_gather_start' op uses axis 'tp', which mesh @world does not have}}
  %0 = meg.all_gather_start %x over @world[tp] dim 0 : tensor<4x8xf32> -> !meg.future<tensor<16x8xf32>>
  return %0 : !meg.future<tensor<16x8xf32>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'meg.reduce_scatter' op uses axis 'dp_shard' twice}}
  %0 = meg.reduce_scatter %x over @world[dp_shard, dp_shard] dim 0 sum : tensor<16x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xbf16>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'meg.all_gather' op produces element type 'f32' from 'bf16'}}
  %0 = meg.all_gather %x over @world[dp_shard] dim 0 : tensor<4x8xbf16> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<4x8xf16>> {
  // expected-error @+1 {{'meg.all_reduce_start' op produces element type 'f16' from 'f32'}}
  %0 = meg.all_reduce_start %x over @world[dp_shard] sum : tensor<4x8xf32> -> !meg.future<tensor<4x8xf16>>
  return %0 : !meg.future<tensor<4x8xf16>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<8x8xf32>> {
  // expected-error @+1 {{'meg.all_reduce_start' op produces 'tensor<8x8xf32>' from 'tensor<4x8xf32>'}}
  %0 = meg.all_reduce_start %x over @world[dp_shard] sum : tensor<4x8xf32> -> !meg.future<tensor<8x8xf32>>
  return %0 : !meg.future<tensor<8x8xf32>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'meg.all_reduce' op failed to verify that all of {input, result} have same type}}
  %0 = "meg.all_reduce"(%x) <{mesh = @world, axes = ["dp_shard"], reduce = #meg<collective_reduce sum>}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %x : tensor<4x8xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'meg.all_gather' op dim 2 is out of range for rank 2}}
  %0 = meg.all_gather %x over @world[dp_shard] dim 2 : tensor<4x8xf32> -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<1x8xf32>> {
  // expected-error @+1 {{'meg.reduce_scatter_start' op dim -1 is out of range for rank 2}}
  %0 = meg.reduce_scatter_start %x over @world[dp_shard] dim -1 sum : tensor<4x8xf32> -> !meg.future<tensor<1x8xf32>>
  return %0 : !meg.future<tensor<1x8xf32>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<6x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{'meg.reduce_scatter' op scatters dim 0 of size 6 over a group of 4, which does not divide it (pad first)}}
  %0 = meg.reduce_scatter %x over @world[dp_shard] dim 0 avg : tensor<6x8xf32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

meg.mesh @world [dp_outer = 2, dp_shard = 4]
meg.submesh @world[dp_outer, dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'meg.all_gather' op over a group of 8 expects result shape [32, 8], got [16, 8]}}
  %0 = meg.all_gather %x over @world[dp_outer, dp_shard] dim 0 : tensor<4x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4x8xf32>) -> !meg.future<tensor<4x8xf32>> {
  // expected-error @+1 {{'meg.all_gather_start' op over a group of 4 expects result shape [4, 32], got [4, 8]}}
  %0 = meg.all_gather_start %x over @world[dp_shard] dim 1 : tensor<4x8xf32> -> !meg.future<tensor<4x8xf32>>
  return %0 : !meg.future<tensor<4x8xf32>>
}

// -----

meg.mesh @world [dp_shard = 4]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<16x8xf32>) -> !meg.future<tensor<16x2xf32>> {
  // expected-error @+1 {{'meg.reduce_scatter_start' op over a group of 4 expects result shape [4, 8], got [16, 2]}}
  %0 = meg.reduce_scatter_start %x over @world[dp_shard] dim 0 sum : tensor<16x8xf32> -> !meg.future<tensor<16x2xf32>>
  return %0 : !meg.future<tensor<16x2xf32>>
}

// -----

func.func @f(%f: !meg.future<tensor<4xf32>>) -> tensor<8xf32> {
  // expected-error @+2 {{'meg.wait' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'meg.wait' op failed to infer returned types}}
  %0 = "meg.wait"(%f) : (!meg.future<tensor<4xf32>>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// meg.fusion, meg.graph_region, meg.yield
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.fusion' op has 2 inputs but its body takes 1 arguments}}
  %0 = meg.fusion (%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    meg.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.fusion' op input 1 has type 'tensor<4xf16>' but body argument 1 has type 'tensor<4xf32>'}}
  %0 = meg.fusion (%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    meg.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0:2 = meg.fusion (%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'meg.yield' op yields 1 values but the region has 2 results}}
    meg.yield %a : tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf16> {
  %0 = meg.fusion (%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'meg.yield' op yields 'tensor<4xf32>' for result 0 of type 'tensor<4xf16>'}}
    meg.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf16>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.graph_region' op expects a non-empty name}}
  %0 = meg.graph_region "" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    meg.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.graph_region' op has 1 inputs but its body takes 0 arguments}}
  %0 = meg.graph_region "layers.0.forward" share_io (%x) : (tensor<4xf32>) -> tensor<4xf32> {
    %c = arith.constant dense<0.0> : tensor<4xf32>
    meg.yield %c : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.graph_region' op input 0 has type 'tensor<4xf32>' but body argument 0 has type 'tensor<2x2xf32>'}}
  %0 = meg.graph_region "layers.0.forward" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    meg.yield %a : tensor<2x2xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) {
  meg.graph_region "layers.0.backward" forward_only (%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'meg.yield' op yields 1 values but the region has 0 results}}
    meg.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = meg.graph_region "g" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %n = meg.neg %a : tensor<4xf32>
    %c = meg.cast %n : tensor<4xf32> to tensor<4xbf16>
    // expected-error @+1 {{'meg.yield' op yields 'tensor<4xbf16>' for result 0 of type 'tensor<4xf32>'}}
    meg.yield %c : tensor<4xbf16>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.yield' op expects parent op to be one of 'meg.fusion, meg.graph_region'}}
  meg.yield %x : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = meg.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'meg.yield' op using value defined outside the region}}
    meg.yield %x : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// meg.adamw
//===----------------------------------------------------------------------===//

func.func @f(%p: tensor<8x4xf32>, %g: tensor<4x8xf32>, %m: tensor<8x4xf32>, %v: tensor<8x4xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'meg.adamw' op expects grad of the parameter's shape [8, 4], got [4, 8]}}
  %0:3 = meg.adamw %p, %g, %m, %v, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>
  return
}

// -----

func.func @f(%p: tensor<8x4xf32>, %g: tensor<8x4xbf16>, %m: tensor<8xf32>, %v: tensor<8x4xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'meg.adamw' op expects exp_avg of the parameter's shape [8, 4], got [8]}}
  %0:3 = meg.adamw %p, %g, %m, %v, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<8x4xf32>, tensor<8x4xbf16>, tensor<8xf32>, tensor<8x4xf32>, tensor<i64>
  return
}

// -----

func.func @f(%p: tensor<8x4xf32>, %g: tensor<8x4xf32>, %m: tensor<8x4xf32>, %v: tensor<8x4x1xbf16>, %step: tensor<i64>) {
  // expected-error @+1 {{'meg.adamw' op expects exp_avg_sq of the parameter's shape [8, 4], got [8, 4, 1]}}
  %0:3 = meg.adamw %p, %g, %m, %v, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4x1xbf16>, tensor<i64>
  return
}

// -----

func.func @f(%p: tensor<8x4xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{expects beta1 in [0, 1), got 1.500000e+00}}
  %0:3 = meg.adamw %p, %p, %p, %p, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 1.5, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Transformer forward ops
//===----------------------------------------------------------------------===//

func.func @f(%t: tensor<128xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.embedding' op expects a rank-2 [vocab, hidden] table, got shape [128]}}
  %0 = meg.embedding %t, %ids : tensor<128xf32>, tensor<2x16xi32>
  return
}

// -----

func.func @f(%t: tensor<128x64xf32>, %ids: tensor<2x16xf32>) {
  // expected-error @+1 {{'meg.embedding' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = meg.embedding %t, %ids : tensor<128x64xf32>, tensor<2x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x4xbf16>) {
  // expected-error @+1 {{'meg.matmul' op expects operands of one element type, got f32 and bf16}}
  %0 = meg.matmul %a, %b : tensor<4x8xf32>, tensor<8x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'meg.matmul' op expects operands of rank >= 2, got shapes [8] and [8, 4]}}
  %0 = meg.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'meg.matmul' op contracts lhs [2, 4, 8] over K = 8 with rhs [4, 8] over K = 4}}
  %0 = meg.matmul %a, %b : tensor<2x4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'meg.matmul' op contracts lhs [4, 8] over K = 4 with rhs [4, 8] over K = 8}}
  %0 = meg.matmul %a, %b transpose_lhs transpose_rhs : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'meg.matmul' op expects equal batch dimensions or a rank-2 rhs, got [2] and [3]}}
  %0 = meg.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'meg.matmul' op expects equal batch dimensions or a rank-2 rhs, got [] and [2]}}
  %0 = meg.matmul %a, %b : tensor<4x8xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8xbf16>) {
  // expected-error @+1 {{'meg.linear' op expects input and weight of one element type, got f32 and bf16}}
  %0 = meg.linear %x, %w : tensor<2x8xf32>, tensor<4x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8x1xf32>) {
  // expected-error @+1 {{'meg.linear' op expects a rank-2 [out, in] weight, got shape [4, 8, 1]}}
  %0 = meg.linear %x, %w : tensor<2x8xf32>, tensor<4x8x1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'meg.linear' op expects the last input dim to equal the weight's in features 8, got input shape [2, 6]}}
  %0 = meg.linear %x, %w : tensor<2x6xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'meg.linear' op expects the last input dim to equal the weight's in features 8, got input shape []}}
  %0 = meg.linear %x, %w : tensor<f32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'meg.linear' op expects a bias of shape [4] and type f32, got tensor<8xf32>}}
  %0 = meg.linear %x, %w bias %b : tensor<2x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'meg.linear' op expects a bias of shape [4] and type f32, got tensor<4xbf16>}}
  %0 = meg.linear %x, %w bias %b : tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'meg.rms_norm' op expects eps in (0, 1], got 0.000000e+00}}
  %0 = meg.rms_norm %x, %w eps 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{'meg.rms_norm' op expects an input of rank >= 1}}
  %0 = meg.rms_norm %x, %w eps 1.0e-5 : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.rms_norm' op expects weight of shape [8] (the last input dim), got [2, 8]}}
  %0 = meg.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xbf16>) {
  // expected-error @+1 {{'meg.rms_norm' op expects weight of element type 'f32', got 'bf16'}}
  %0 = meg.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.layer_norm' op expects eps in (0, 1], got -1.000000e-05}}
  %0 = meg.layer_norm %x eps -1.0e-5 : tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'meg.layer_norm' op expects weight of shape [8] (the last input dim), got [4]}}
  %0 = meg.layer_norm %x affine %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'meg.layer_norm' op expects bias of shape [8] (the last input dim), got [4]}}
  %0 = meg.layer_norm %x affine %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf16>) {
  // expected-error @+1 {{'meg.layer_norm' op expects bias of element type 'f32', got 'f16'}}
  %0 = meg.layer_norm %x affine %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x32xf32>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{'meg.rope' op expects a rank-4 bshd input, got shape [2, 16, 32]}}
  %0 = meg.rope %x, %c, %c layout bshd : tensor<2x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x4x32xf32>, %c: tensor<16x32xf32>, %s: tensor<16x32xbf16>) {
  // expected-error @+1 {{'meg.rope' op expects cos and sin of one type, got 'tensor<16x32xf32>' and 'tensor<16x32xbf16>'}}
  %0 = meg.rope %x, %c, %s layout bshd : tensor<2x16x4x32xf32>, tensor<16x32xf32>, tensor<16x32xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x4x32xf32>, %c: tensor<32xf32>) {
  // expected-error @+1 {{'meg.rope' op expects [seq, rotary_dim] cos/sin tables, got shape [32]}}
  %0 = meg.rope %x, %c, %c layout bshd : tensor<2x16x4x32xf32>, tensor<32xf32>, tensor<32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x4x32xf32>, %c: tensor<16x7xf32>) {
  // expected-error @+1 {{'meg.rope' op expects rotary dim 7 to be even, >= 2 and <= head dim 32}}
  %0 = meg.rope %x, %c, %c layout bshd : tensor<2x16x4x32xf32>, tensor<16x7xf32>, tensor<16x7xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x4x32xf32>, %c: tensor<16x64xf32>) {
  // expected-error @+1 {{'meg.rope' op expects rotary dim 64 to be even, >= 2 and <= head dim 32}}
  %0 = meg.rope %x, %c, %c layout bshd interleaved : tensor<2x16x4x32xf32>, tensor<16x64xf32>, tensor<16x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x4x32xf32>, %c: tensor<8x32xf32>) {
  // expected-error @+1 {{'meg.rope' op has a 8-row frequency table for sequence length 16}}
  %0 = meg.rope %x, %c, %c layout bshd : tensor<2x16x4x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
  return
}

// -----

// With the sbhd layout the sequence is dimension 0.
func.func @f(%x: tensor<16x2x4x32xf32>, %c: tensor<8x32xf32>) {
  // expected-error @+1 {{'meg.rope' op has a 8-row frequency table for sequence length 16}}
  %0 = meg.rope %x, %c, %c layout sbhd : tensor<16x2x4x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'meg.attention' op expects a scale > 0 that f32 can hold}}
  %0 = meg.attention %q, %k, %k scale 0.0 : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x128xf32>, %k: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'meg.attention' op expects rank-4 [batch, seq, heads, head_dim] q, k and v, got shapes [2, 16, 128], [2, 16, 2, 32] and [2, 16, 2, 32]}}
  %0 = meg.attention %q, %k, %k causal scale 0.125 : tensor<2x16x128xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xbf16>) {
  // expected-error @+1 {{'meg.attention' op expects q, k and v of one element type}}
  %0 = meg.attention %q, %k, %v scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xbf16>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<3x16x2x32xf32>) {
  // expected-error @+1 {{'meg.attention' op expects q, k and v of one batch size}}
  %0 = meg.attention %q, %k, %k scale 0.125 : tensor<2x16x4x32xf32>, tensor<3x16x2x32xf32>, tensor<3x16x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x8x2x32xf32>) {
  // expected-error @+1 {{'meg.attention' op expects k and v with the same sequence length and head count, got [2, 16, 2, 32] and [2, 8, 2, 32]}}
  %0 = meg.attention %q, %k, %v scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x8x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x16xf32>) {
  // expected-error @+1 {{'meg.attention' op expects q and k of one head dim, got 32 and 16}}
  %0 = meg.attention %q, %k, %k scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x4x32xf32>, %k: tensor<2x16x3x32xf32>) {
  // expected-error @+1 {{'meg.attention' op expects the 4 query heads to be a multiple of the 3 key/value heads}}
  %0 = meg.attention %q, %k, %k scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x3x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.softmax' op axis 2 is out of range for rank 2}}
  %0 = meg.softmax %x axis 2 : tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.softmax' op axis -1 is out of range for rank 2}}
  %0 = meg.softmax %x axis -1 : tensor<2x8xf32>
  return
}

// -----

func.func @f(%l: tensor<2x16x128xf32>, %t: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.cross_entropy' op expects reduction mean or sum}}
  %0 = meg.cross_entropy %l, %t max : tensor<2x16x128xf32>, tensor<2x16xi32>
  return
}

// -----

func.func @f(%l: tensor<2x16x128xf32>, %t: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.cross_entropy' op takes an ignore index only with reduction sum: the mean over the labels that count is the sum divided by meg.label_count}}
  %0 = meg.cross_entropy %l, %t mean ignore -100 : tensor<2x16x128xf32>, tensor<2x16xi32>
  return
}

// -----

func.func @f(%d: tensor<f32>, %l: tensor<2x16x128xf32>, %t: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.cross_entropy_grad' op takes an ignore index only with reduction sum}}
  %0 = meg.cross_entropy_grad %d, %l, %t mean ignore -100 : tensor<2x16x128xf32>, tensor<2x16xi32>
  return
}

// -----

func.func @f(%t: tensor<2x16xf32>) {
  // expected-error @+1 {{'meg.label_count' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = meg.label_count %t ignore -100 : tensor<2x16xf32>
  return
}

// -----

func.func @f(%l: tensor<2x16x128xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{'meg.cross_entropy' op expects labels of shape [2, 16] for logits [2, 16, 128], got [2, 8]}}
  %0 = meg.cross_entropy %l, %t mean : tensor<2x16x128xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %s: tensor<2x64xf32>) {
  // expected-error @+1 {{'meg.modulate' op expects a rank-3 [batch, seq, hidden] input, got [2, 64]}}
  %0 = meg.modulate %x, %s, %s : tensor<2x64xf32>, tensor<2x64xf32>, tensor<2x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x64xf32>, %shift: tensor<2x16x64xf32>, %scale: tensor<2x64xf32>) {
  // expected-error @+1 {{'meg.modulate' op expects shift of shape [2, 64] and element type 'f32', got 'tensor<2x16x64xf32>'}}
  %0 = meg.modulate %x, %shift, %scale : tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x64xf32>, %shift: tensor<2x64xf32>, %scale: tensor<2x64xbf16>) {
  // expected-error @+1 {{'meg.modulate' op expects scale of shape [2, 64] and element type 'f32', got 'tensor<2x64xbf16>'}}
  %0 = meg.modulate %x, %shift, %scale : tensor<2x16x64xf32>, tensor<2x64xf32>, tensor<2x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

func.func @f(%dy: tensor<2x16x64xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.embedding_grad' op expects a rank-2 [vocab, hidden] result, got [128]}}
  %0 = meg.embedding_grad %dy, %ids : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<128xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x16x32xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.embedding_grad' op expects a gradient of shape [2, 16, 64], got [2, 16, 32]}}
  %0 = meg.embedding_grad %dy, %ids : tensor<2x16x32xf32>, tensor<2x16xi32> -> tensor<128x64xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x16x64xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'meg.embedding_grad' op expects the result element type 'bf16' to match the gradient's 'f32'}}
  %0 = meg.embedding_grad %dy, %ids : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<128x64xbf16>
  return
}

// -----

func.func @f(%dy: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'meg.rms_norm_grad' op expects eps in (0, 1], got 0.000000e+00}}
  %0:2 = meg.rms_norm_grad %dy, %dy, %w eps 0.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'meg.rms_norm_grad' op expects weight of shape [8] (the last input dim), got [4]}}
  %0:2 = meg.rms_norm_grad %dy, %dy, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.layer_norm_grad' op expects eps > 0}}
  %0 = meg.layer_norm_grad %dy, %dy eps 0.0 : tensor<2x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8xf32>, %w: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.layer_norm_grad' op expects weight of shape [8], got [2, 8]}}
  %0:3 = meg.layer_norm_grad %dy, %dy weight %w eps 1.0e-5 : tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x16x4x32xf32>, %c: tensor<16x3xf32>) {
  // expected-error @+1 {{'meg.rope_grad' op expects rotary dim 3 to be even, >= 2 and <= head dim 32}}
  %0 = meg.rope_grad %dy, %c, %c layout bshd : tensor<2x16x4x32xf32>, tensor<16x3xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x16x32xf32>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{'meg.rope_grad' op expects a rank-4 sbhd input, got shape [2, 16, 32]}}
  %0 = meg.rope_grad %dy, %c, %c layout sbhd : tensor<2x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

func.func @f(%o: tensor<2x16x4x32xf32>, %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x3x32xf32>) {
  // expected-error @+1 {{'meg.attention_grad' op expects the 4 query heads to be a multiple of the 3 key/value heads}}
  %0:3 = meg.attention_grad %o, %q, %k, %k, %o scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x3x32xf32>
  return
}

// -----

func.func @f(%o: tensor<2x16x4x32xf32>, %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x16xf32>) {
  // expected-error @+1 {{'meg.attention_grad' op expects an output gradient of type 'tensor<2x16x4x16xf32>', got 'tensor<2x16x4x32xf32>'}}
  %0:3 = meg.attention_grad %o, %q, %k, %v, %o causal scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x16xf32>
  return
}

// -----

func.func @f(%o: tensor<2x16x4x32xf32>, %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>, %lse: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'meg.attention_grad' op expects softmax statistics of type 'tensor<2x4x16xf32>' ([batch, heads, seq_q] f32), got 'tensor<2x16x4xf32>'}}
  %0:3 = meg.attention_grad %o, %q, %k, %k, %o stats %lse scale 0.125 : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @f(%o: tensor<2x16x4x32xf32>, %q: tensor<2x16x4x32xf32>, %k: tensor<2x16x2x32xf32>) {
  // expected-error @+1 {{'meg.attention_grad' op expects a scale > 0 that f32 can hold}}
  %0:3 = meg.attention_grad %o, %q, %k, %k, %o scale -1.0 : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.softmax_grad' op axis 2 is out of range for rank 2}}
  %0 = meg.softmax_grad %dy, %dy axis 2 : tensor<2x8xf32>
  return
}

// -----

func.func @f(%d: tensor<f32>, %l: tensor<2x16x128xf32>, %t: tensor<2x16xi32>) {
  // expected-error @+1 {{'meg.cross_entropy_grad' op expects reduction mean or sum}}
  %0 = meg.cross_entropy_grad %d, %l, %t max : tensor<2x16x128xf32>, tensor<2x16xi32>
  return
}

// -----

func.func @f(%d: tensor<f32>, %l: tensor<2x16x128xf32>, %t: tensor<2x16x128xi32>) {
  // expected-error @+1 {{'meg.cross_entropy_grad' op expects labels of shape [2, 16] for logits [2, 16, 128], got [2, 16, 128]}}
  %0 = meg.cross_entropy_grad %d, %l, %t sum : tensor<2x16x128xf32>, tensor<2x16x128xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise, cast and shape ops
//===----------------------------------------------------------------------===//

func.func @f(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'meg.add' op expects operands of one element type, got f32 and bf16}}
  %0 = meg.add %a, %b : tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'meg.add' op cannot broadcast operand shapes [2, 3] and [4]}}
  %0 = meg.add %a, %b : tensor<2x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'meg.sub' op cannot broadcast operand shapes [2, 3] and [3, 3]}}
  %0 = meg.sub %a, %b : tensor<2x3xf32>, tensor<3x3xf32>
  return
}

// -----

func.func @f(%a: tensor<4xi32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{'meg.mul' op expects operands of one element type, got i32 and i64}}
  %0 = meg.mul %a, %b : tensor<4xi32>, tensor<4xi64>
  return
}

// -----

func.func @f(%a: tensor<2x1x3xf16>, %b: tensor<5x2xf16>) {
  // expected-error @+1 {{'meg.div' op cannot broadcast operand shapes [2, 1, 3] and [5, 2]}}
  %0 = meg.div %a, %b : tensor<2x1x3xf16>, tensor<5x2xf16>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'meg.max' op expects operands of one element type, got f32 and f16}}
  %0 = meg.max %a, %b : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

// The generic form reports the inference error and then the mismatch.
func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'meg.add' op cannot broadcast operand shapes [4] and [3]}}
  // expected-error @+1 {{'meg.add' op failed to infer returned types}}
  %0 = "meg.add"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<1xf32>) {
  // expected-error @+2 {{'meg.add' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<1x4xf32>'}}
  // expected-error @+1 {{'meg.add' op failed to infer returned types}}
  %0 = "meg.add"(%a, %b) : (tensor<4xf32>, tensor<1xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xi32>) {
  // expected-error @+1 {{'meg.neg' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = meg.neg %a : tensor<4xi32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{'meg.cast' op requires the same shape for all operands and results}}
  %0 = meg.cast %a : tensor<4xf32> to tensor<2x2xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'meg.reshape' op changes the element type from 'f32' to 'bf16'; use meg.cast}}
  %0 = meg.reshape %a : tensor<2x3xf32> to tensor<6xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'meg.reshape' op reshapes [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = meg.reshape %a : tensor<2x3xf32> to tensor<7xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'meg.transpose' op expects a permutation of 3 dimensions, got 2}}
  %0 = meg.transpose %a [1, 0] : tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'meg.transpose' op [0, 0, 1] is not a permutation of [0, 3)}}
  %0 = meg.transpose %a [0, 0, 1] : tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'meg.transpose' op [0, 3, 1] is not a permutation of [0, 3)}}
  %0 = meg.transpose %a [0, 3, 1] : tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.slice' op expects 2 offsets, sizes and strides for a rank-2 input, got 2, 1 and 2}}
  %0 = meg.slice %a [0, 0] [2] [1, 1] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.slice' op expects offset >= 0, size >= 1 and stride >= 1 in dim 1, got -1, 4 and 1}}
  %0 = meg.slice %a [0, -1] [2, 4] [1, 1] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.slice' op expects offset >= 0, size >= 1 and stride >= 1 in dim 0, got 0, 0 and 1}}
  %0 = meg.slice %a [0, 0] [0, 4] [1, 1] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.slice' op expects offset >= 0, size >= 1 and stride >= 1 in dim 1, got 0, 4 and 0}}
  %0 = meg.slice %a [0, 0] [2, 4] [1, 0] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.slice' op reads index 8 of dim 1, which has size 8}}
  %0 = meg.slice %a [0, 2] [2, 4] [1, 2] : tensor<2x8xf32>
  return
}

// -----

// Zero inputs can only be written in the generic form.
func.func @f() {
  // expected-error @+2 {{'meg.concat' op expects at least one input}}
  // expected-error @+1 {{'meg.concat' op failed to infer returned types}}
  %0 = "meg.concat"() <{axis = 0 : i64}> : () -> tensor<2xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.concat' op axis 2 is out of range for rank 2}}
  %0 = meg.concat %a, %a axis 2 : tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %b: tensor<2x8xbf16>) {
  // expected-error @+1 {{'meg.concat' op input 2 has element type bf16, input 0 has f32}}
  %0 = meg.concat %a, %a, %b axis 1 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %b: tensor<2x8x1xf32>) {
  // expected-error @+1 {{'meg.concat' op input 1 has rank 3, input 0 has rank 2}}
  %0 = meg.concat %a, %b axis 1 : tensor<2x8xf32>, tensor<2x8x1xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{'meg.concat' op input 1 has shape [3, 4], which differs from input 0 [2, 8] outside axis 1}}
  %0 = meg.concat %a, %b axis 1 : tensor<2x8xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.split' op axis 2 is out of range for rank 2}}
  %0:2 = meg.split %a axis 2 sizes [4, 4] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.split' op expects at least one piece size}}
  meg.split %a axis 1 sizes [] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.split' op expects piece sizes >= 1, got 0}}
  %0:3 = meg.split %a axis 1 sizes [4, 0, 4] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.split' op piece sizes [3, 4] add up to 7 but axis 1 has size 8}}
  %0:2 = meg.split %a axis 1 sizes [3, 4] : tensor<2x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'meg.iota' op counts along dim 1 of a rank-1 result}}
  %0 = meg.iota dim 1 : tensor<16xf32>
  return
}

// -----

// A negative dim is rejected (the message currently prints it as an unsigned
// 64-bit value).
func.func @f() {
  // expected-error-re @+1 {{'meg.iota' op counts along dim {{(-1|18446744073709551615)}} of a rank-2 result}}
  %0 = meg.iota dim -1 : tensor<4x16xi64>
  return
}

// -----

func.func @f(%a: tensor<1x8xf32>) {
  // expected-error @+1 {{'meg.broadcast' op changes the element type from 'f32' to 'f16'}}
  %0 = meg.broadcast %a : tensor<1x8xf32> to tensor<4x8xf16>
  return
}

// -----

func.func @f(%a: tensor<3xf32>) {
  // expected-error @+1 {{'meg.broadcast' op cannot broadcast [3] to [4, 2]}}
  %0 = meg.broadcast %a : tensor<3xf32> to tensor<4x2xf32>
  return
}

// -----

// Broadcasting never shrinks the rank.
func.func @f(%a: tensor<1x8xf32>) {
  // expected-error @+1 {{'meg.broadcast' op cannot broadcast [1, 8] to [8]}}
  %0 = meg.broadcast %a : tensor<1x8xf32> to tensor<8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.reduce' op expects at least one dim}}
  %0 = meg.reduce sum %a dims [] : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'meg.reduce' op dim 2 is out of range for rank 2}}
  %0 = meg.reduce max %a dims [0, 2] keep_dims : tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'meg.reduce' op expects distinct, increasing dims, got [1, 0]}}
  %0 = meg.reduce mean %a dims [1, 0] : tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'meg.reduce' op expects distinct, increasing dims, got [1, 1]}}
  %0 = meg.reduce mean %a dims [1, 1] : tensor<2x8x4xf32>
  return
}

// -----

func.func @layer_norm_weight_without_bias(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'meg.layer_norm' op expects weight and bias together (affine) or neither, got only the weight}}
  %0 = "meg.layer_norm"(%x, %w) <{eps = 1.0e-5 : f64, operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %lab: tensor<i32>) {
  // expected-error @+1 {{'meg.cross_entropy' op expects logits of rank >= 1 ([..., classes]), got a scalar}}
  %0 = meg.cross_entropy %l, %lab mean : tensor<f32>, tensor<i32>
  return
}

// -----

func.func @cross_entropy_grad_scalar_logits(%d: tensor<f32>, %l: tensor<f32>, %lab: tensor<i32>) {
  // expected-error @+1 {{'meg.cross_entropy_grad' op expects logits of rank >= 1 ([..., classes]), got a scalar}}
  %0 = meg.cross_entropy_grad %d, %l, %lab mean : tensor<f32>, tensor<i32>
  return
}

// -----

func.func @wait_on_tensor(%a: tensor<2xf32>) {
  // expected-error @+1 {{'meg.wait' op expects a !meg.future operand, got tensor<2xf32>}}
  %0 = meg.wait %a : tensor<2xf32>
  return
}

// -----

// The optimizer must consume what the precision policy says (a gradient
// that widens exactly to main_grads, bf16 for f32, is that value; f32 for
// bf16 main grads is not).
module attributes {meg.precision = #meg.precision<param = f32, main_params = f32, main_grads = bf16, grad_reduce = bf16, exp_avg = f32, exp_avg_sq = f32>} {
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @grad_dtype(%g: tensor<4xf32>, %m: tensor<4xf32>, %step: tensor<i64>) {
    %p = meg.param_ref @w : tensor<4xf32>
    // expected-error @+1 {{'meg.adamw' op receives the gradient in 'f32' but the precision policy says 'bf16' (parameter @w)}}
    %0:3 = meg.adamw %p, %g, %m, %m, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
    return
  }
}

// -----

// Expert weights (blocks over ep) are held to the policy as dense ones: the
// gradient reaching their update must be main_grads (DeepSeek-V3 under FSDP).
module attributes {meg.precision = #meg.precision<param = bf16, main_params = f32, main_grads = bf16, grad_reduce = bf16, exp_avg = f32, exp_avg_sq = f32>} {
  meg.mesh @world [dp_shard = 1, ep = 2]
  meg.submesh @world[ep]
  meg.param @experts.up_proj.weight : tensor<1x4x8xbf16> init #meg.init<normal(0.02)> sharding #meg.sharding<mesh = @world, axes = ["ep"], shape = [2, 4, 8], dim = 0> parts ["experts.0.up_proj.weight", "experts.1.up_proj.weight"]
  meg.param state @optimizer.main_param.experts.up_proj.weight : tensor<1x4x8xf32> init #meg.init<copy(@experts.up_proj.weight)> sharding #meg.sharding<mesh = @world, axes = ["ep"], shape = [2, 4, 8], dim = 0>
  func.func @expert_grad_dtype(%g: tensor<1x4x8xf32>, %m: tensor<1x4x8xf32>, %step: tensor<i64>) {
    %p = meg.param_ref @optimizer.main_param.experts.up_proj.weight : tensor<1x4x8xf32>
    // expected-error @+1 {{'meg.adamw' op receives the gradient in 'f32' but the precision policy says 'bf16' (parameter @optimizer.main_param.experts.up_proj.weight)}}
    %0:3 = meg.adamw %p, %g, %m, %m, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<i64>
    return
  }
}

// -----

// The expert-data-parallel group (dp_shard without ep) must be registered,
// as meg-fsdp does; the dense group holding ep does not stand for it.
meg.mesh @world [dp_shard = 2, ep = 2]
meg.submesh @world[dp_shard, ep]
meg.submesh @world[ep]
func.func @expert_group(%g: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.reduce_scatter' op communicates over @world[dp_shard], which is not a registered submesh; registered: @world[dp_shard, ep], @world[ep]}}
  %0 = meg.reduce_scatter %g over @world[dp_shard] dim 0 avg : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// f16 does not widen to bf16 exactly.
module attributes {meg.precision = #meg.precision<param = f32, main_params = f32, main_grads = bf16, grad_reduce = bf16, exp_avg = f32, exp_avg_sq = f32>} {
  meg.param @w : tensor<4xf32> init #meg.init<ones>
  func.func @grad_not_widening(%g: tensor<4xf16>, %m: tensor<4xf32>, %step: tensor<i64>) {
    %p = meg.param_ref @w : tensor<4xf32>
    // expected-error @+1 {{'meg.adamw' op receives the gradient in 'f16' but the precision policy says 'bf16' (parameter @w)}}
    %0:3 = meg.adamw %p, %g, %m, %m, %step config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
    return
  }
}

// -----

// expected-error @+1 {{kernel_strategy tile 3 does not divide domain dimension 1 of extent 8}}
func.func @tile_not_dividing() attributes {meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [4, 8], tile = [1, 3], vector = 4>} {
  return
}

// -----

// expected-error @+1 {{kernel_strategy has a domain of rank 2 but a tile of rank 1}}
func.func @tile_rank() attributes {meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [4, 8], tile = [1], vector = 4>} {
  return
}

// -----

// expected-error @+1 {{kernel_strategy vector width 3 is not a positive power of two}}
func.func @vector_width() attributes {meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [4], tile = [4], vector = 3>} {
  return
}

// -----

// expected-error @+1 {{a serial kernel_strategy has no domain}}
func.func @serial_domain() attributes {meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [4], tile = [4], vector = 4>} {
  return
}

// -----

// expected-error @+1 {{unknown kernel strategy 'tiled'; expected serial, pointwise, row_reduction, column_reduction or full_reduction}}
func.func @unknown_kind() attributes {meg.kernel_strategy = #meg.kernel_strategy<tiled, domain = [], tile = [], vector = 4>} {
  return
}

// -----

// expected-error @+1 {{'meg.kernel_strategy' is only valid on a kernel function}}
module attributes {meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [], tile = [], vector = 1>} {
}

// -----

// expected-error @+1 {{'meg.online_softmax' is a unit attribute of a linalg.generic reducing into two outputs (a maximum and a sum of exponentials)}}
func.func @online_softmax_on_a_function() attributes {meg.online_softmax} {
  return
}

// -----

#row = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @online_softmax_one_output(%x: memref<4x64xf32>, %m: memref<4xf32>) {
  // expected-error @+1 {{'meg.online_softmax' is a unit attribute of a linalg.generic reducing into two outputs}}
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) attrs = {meg.online_softmax} {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// expected-error @+1 {{'meg.in_place' names argument 1 of a function with 1 arguments}}
func.func @in_place_range(%x: memref<4xf32>) attributes {meg.in_place = array<i64: 1>} {
  return
}

// -----

// expected-error @+1 {{alias "lm_head.weight" is also an alias of @other}}
meg.param @model.embed_tokens.weight : tensor<8x4xf32> init #meg.init<normal(0.02)> aliases ["lm_head.weight"]
meg.param @other : tensor<8x4xf32> init #meg.init<normal(0.02)> aliases ["lm_head.weight"]

// -----

// expected-error @+1 {{alias 'lm_head.weight' is the name of another symbol}}
meg.param @model.embed_tokens.weight : tensor<8x4xf32> init #meg.init<normal(0.02)> aliases ["lm_head.weight"]
meg.param @lm_head.weight : tensor<8x4xf32> init #meg.init<normal(0.02)>

// -----

// expected-error @+1 {{has 3 parts, which must be the slices along dim 0 of its [2, 4, 8] shape}}
meg.param @experts.up_proj.weight : tensor<2x4x8xf32> init #meg.init<normal(0.02)> parts ["experts.0.up_proj.weight", "experts.1.up_proj.weight", "experts.2.up_proj.weight"]

// -----

// expected-error @+1 {{part 'experts.0.up_proj.weight' must be a non-empty name, other than the parameter's own and the other parts'}}
meg.param @experts.up_proj.weight : tensor<2x4x8xf32> init #meg.init<normal(0.02)> parts ["experts.0.up_proj.weight", "experts.0.up_proj.weight"]

// -----

// expected-error @+1 {{is training state, which checkpoints hold whole, so it cannot have parts}}
meg.param state @experts.up_proj.weight : tensor<2x4x8xf32> init #meg.init<zeros> parts ["a", "b"]

// -----

// expected-error @+1 {{part "experts.0.up_proj.weight" is the name of another symbol}}
meg.param @experts.up_proj.weight : tensor<2x4x8xf32> init #meg.init<normal(0.02)> parts ["experts.0.up_proj.weight", "experts.1.up_proj.weight"]
meg.param @experts.0.up_proj.weight : tensor<4x8xf32> init #meg.init<normal(0.02)>

// -----

// expected-error @+1 {{part "b" is also a checkpoint name of @other}}
meg.param @experts.up_proj.weight : tensor<2x4x8xf32> init #meg.init<normal(0.02)> parts ["a", "b"]
meg.param @other : tensor<8x4xf32> init #meg.init<normal(0.02)> aliases ["b"]

// -----

// expected-error @+1 {{'meg.hf_config' must be a JSON object}}
module attributes {meg.hf_config = "[1, 2]"} {
}

// -----

meg.mesh @world [dp_shard = 2, tp = 2]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.copy_to_group' op communicates over @world[tp], which is not a registered submesh; registered: @world[dp_shard]}}
  %y = meg.copy_to_group %x over @world[tp] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f(%l: tensor<2x8xf32>, %m: tensor<2xf32>, %y: tensor<2xi32>, %first: tensor<i32>) {
  // expected-error @+1 {{'meg.vocab_shard_stats' op expects a vocabulary that is a multiple of the 8 classes of each rank, got 20}}
  %s, %t, %k = meg.vocab_shard_stats %l, %m, %y, %first vocab 20 : tensor<2x8xf32>, tensor<2xf32>, tensor<2xi32>, tensor<i32>
  return
}

// -----

func.func @f(%l: tensor<2x8xf32>, %m: tensor<3xf32>, %y: tensor<2xi32>, %first: tensor<i32>) {
  // expected-error @+1 {{'meg.vocab_shard_stats' op expects max and labels of the logits' shape without its last dimension, got logits [2, 8], max [3] and labels [2]}}
  %s, %t, %k = meg.vocab_shard_stats %l, %m, %y, %first vocab 16 : tensor<2x8xf32>, tensor<3xf32>, tensor<2xi32>, tensor<i32>
  return
}

// -----

func.func @f(%l: tensor<2x8xf32>, %m: tensor<2xf32>, %y: tensor<2xi32>, %first: tensor<i32>) {
  // expected-error @+1 {{'meg.vocab_shard_stats' op ignores label 3, which is a class of the vocabulary of 16}}
  %s, %t, %k = meg.vocab_shard_stats %l, %m, %y, %first vocab 16 ignore 3 : tensor<2x8xf32>, tensor<2xf32>, tensor<2xi32>, tensor<i32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

func.func @f(%s: tensor<8x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{'meg.moe_route' op splits 6 experts into 4 groups, which does not divide them}}
  %e, %w = meg.moe_route %s, %b top_k 2 groups 4 top_groups 1 scaling 1.0
      : tensor<8x6xf32>, tensor<6xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  return
}

// -----

func.func @f(%s: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'meg.moe_route' op expects a scaling > 0 that f32 can hold, got 1.000000e+40}}
  %e, %w = meg.moe_route %s, %b top_k 1 groups 1 top_groups 1 scaling 1.0e40
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x1xi32>, tensor<8x1xf32>
  return
}

// -----

func.func @f(%s: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'meg.moe_route' op scores each group by its two best experts, but groups of 1 expert have fewer}}
  %e, %w = meg.moe_route %s, %b top_k 1 groups 4 top_groups 1 scaling 1.0
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x1xi32>, tensor<8x1xf32>
  return
}

// -----

func.func @f(%s: tensor<8x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'meg.moe_route' op takes top_k = 5 experts from the 4 of the groups it keeps; expected between 1 and 4}}
  %e, %w = meg.moe_route %s, %b top_k 5 groups 2 top_groups 1 scaling 1.0
      : tensor<8x8xf32>, tensor<8xf32> -> tensor<8x5xi32>, tensor<8x5xf32>
  return
}

// -----

func.func @f(%s: tensor<8x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'meg.moe_route' op expects bias of shape [8], got [4]}}
  %e, %w = meg.moe_route %s, %b top_k 2 groups 2 top_groups 1 scaling 1.0
      : tensor<8x8xf32>, tensor<4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  return
}

// -----

func.func @f(%e: tensor<8x2xi32>, %w: tensor<8x2xf32>) {
  // expected-error @+1 {{'meg.moe_assign' op expects slot_tokens of shape [4, 3], got [4, 4]}}
  %t, %c, %p, %l, %d = meg.moe_assign %e, %w experts 4 capacity 3 policy probs
      : tensor<8x2xi32>, tensor<8x2xf32> -> tensor<4x4xi32>, tensor<4x3xi32>,
        tensor<8x2xi32>, tensor<4xi32>, tensor<i32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %i: tensor<4x4xi32>, %p: tensor<6x2xi32>) {
  // expected-error @+1 {{'meg.gather_rows' op expects an inverse of shape [8, m] (the result rows reading each source row), got [6, 2]}}
  %g = meg.gather_rows %x, %i inverse %p
      : tensor<8x16xf32>, tensor<4x4xi32>, tensor<6x2xi32> -> tensor<4x4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %i: tensor<4x4xi32>) {
  // expected-error @+1 {{'meg.gather_rows' op expects a result of shape [4, 4, 16], got [4, 16]}}
  %g = meg.gather_rows %x, %i : tensor<8x16xf32>, tensor<4x4xi32> -> tensor<4x16xf32>
  return
}

// -----

meg.mesh @world [dp_outer = 1, dp_shard = 4, tp = 1]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'meg.all_to_all' op exchanges pieces of dim 0 with a group of 4, which does not divide its 6 rows}}
  %y = meg.all_to_all %x over @world[dp_shard] : tensor<6x8xf32>
  return
}

// -----

meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'meg.all_to_all' op communicates over @world[dp_outer], which is not a registered submesh; registered: @world[dp_shard]}}
  %y = meg.all_to_all %x over @world[dp_outer] : tensor<8x8xf32>
  return
}

// -----

meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'meg.shift' op communicates over @world[dp_outer], which is not a registered submesh; registered: @world[dp_shard]}}
  %y = meg.shift %x over @world[dp_outer] by 1 : tensor<8x8xf32>
  return
}

// -----

meg.mesh @world [cp = 2]
meg.submesh @world[cp]
func.func @f(%q: tensor<1x6x2x8xf32>, %k: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{'meg.ring_attention' op expects as many keys as queries on a rank (its two chunks of the sequence), got 4 keys for 6 queries}}
  %o = meg.ring_attention %q, %k, %k over @world[cp] scale 0.25 : tensor<1x6x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  return
}

// -----

meg.mesh @world [cp = 2]
meg.submesh @world[cp]
func.func @f(%q: tensor<1x5x2x8xf32>) {
  // expected-error @+1 {{'meg.ring_attention_grad' op expects a rank's two equal chunks of the sequence, got 5 tokens}}
  %dq, %dk, %dv = meg.ring_attention_grad %q, %q, %q, %q, %q over @world[cp] scale 0.25 : tensor<1x5x2x8xf32>, tensor<1x5x2x8xf32>, tensor<1x5x2x8xf32>, tensor<1x5x2x8xf32>
  return
}

// -----

meg.mesh @world [cp = 2, tp = 2]
meg.submesh @world[cp]
func.func @f(%q: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{'meg.ring_attention' op communicates over @world[tp], which is not a registered submesh; registered: @world[cp]}}
  %o = meg.ring_attention %q, %q, %q over @world[tp] scale 0.25 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  return
}

// -----

meg.mesh @world [cp = 2]
meg.submesh @world[cp]
func.func @f(%q: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{'meg.ring_attention' op expects a scale > 0 that f32 can hold, got 0.000000e+00}}
  %o = meg.ring_attention %q, %q, %q over @world[cp] scale 0.0 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  return
}

// -----

meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
meg.submesh @world[dp_shard]
func.func @f(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'meg.shift' op failed to verify that all of {input, result} have same type}}
  %y = "meg.shift"(%x) {mesh = @world, axes = ["dp_shard"], offset = 1 : i64} : (tensor<8x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

meg.param @bias : tensor<4xf32> init #meg.init<zeros>
func.func @bias_not_frozen(%load: tensor<4xf32>) {
  // expected-error @+1 {{'meg.expert_bias_update' op updates @bias, which is not frozen: a routing bias gets no gradient, only this update}}
  meg.expert_bias_update @bias, %load rate 1.0e-3 : tensor<4xf32>
  return
}

// -----

meg.param frozen @bias : tensor<8xf32> init #meg.init<zeros>
func.func @bias_type(%load: tensor<4xf32>) {
  // expected-error @+1 {{'meg.expert_bias_update' op updates @bias of type 'tensor<8xf32>' from a load of type 'tensor<4xf32>'}}
  meg.expert_bias_update @bias, %load rate 1.0e-3 : tensor<4xf32>
  return
}

// -----

func.func @bias_missing(%load: tensor<4xf32>) {
  // expected-error @+1 {{'meg.expert_bias_update' op updates @nowhere, which is not a meg.param}}
  meg.expert_bias_update @nowhere, %load rate 1.0e-3 : tensor<4xf32>
  return
}

// -----

meg.param frozen @bias : tensor<4xf32> init #meg.init<zeros>
func.func @bias_rate(%load: tensor<4xf32>) {
  // expected-error @+1 {{'meg.expert_bias_update' op expects a rate > 0 that f32 can hold, got 0}}
  meg.expert_bias_update @bias, %load rate 0.0 : tensor<4xf32>
  return
}

// -----

meg.mesh @world [ep = 2]
meg.submesh @world[ep]
func.func @all_to_all_start_type(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{'meg.all_to_all_start' op exchanges 'tensor<8x2xf32>' pieces, so its future must hold that type, got 'tensor<4x2xf32>'}}
  %f = meg.all_to_all_start %x over @world[ep] : tensor<8x2xf32> -> !meg.future<tensor<4x2xf32>>
  return
}

// -----

meg.param @w : tensor<4xf32> init #meg.init<zeros>
// expected-error @+1 {{'meg.param' op 'meg.state_of' must be on a state parameter and name a trainable meg.param, not @w}}
meg.param @m : tensor<4xf32> init #meg.init<zeros> {meg.state_of = #meg.state_of<exp_avg of @w>}

// -----

meg.param frozen @w : tensor<4xf32> init #meg.init<zeros>
// expected-error @+1 {{'meg.param' op 'meg.state_of' must be on a state parameter and name a trainable meg.param, not @w}}
meg.param state @m : tensor<4xf32> init #meg.init<zeros> {meg.state_of = #meg.state_of<exp_avg_sq of @w>}

// -----

// expected-error @+1 {{'meg.state_of' expects a #meg.state_of on a meg.param}}
func.func @f() attributes {meg.state_of = 1 : i64} {
  return
}

// -----

meg.param frozen @w : tensor<4xf32> init #meg.init<zeros>
// expected-error @+1 {{'meg.grad_of' on result 0 expects a trainable meg.param, not @w}}
func.func @grad() -> (tensor<4xf32> {meg.grad_of = @w}) {
  %0 = meg.param_ref @w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'meg.grad_of' on result 0 expects a trainable meg.param, not @missing}}
func.func @grad(%x: tensor<4xf32>) -> (tensor<4xf32> {meg.grad_of = @missing}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{vector_bits 48 is not a power of two from 32 to 512}}
func.func @f() attributes {t = #meg.target<cpu, vector_bits = 48>} {
  return
}

// -----

// expected-error @+1 {{unsupported arch 'sm_80'; expected sm_90 or newer}}
func.func @f() attributes {t = #meg.target<cuda, arch = "sm_80">} {
  return
}

// -----

// expected-error @+1 {{unknown target 'tpu'; expected cpu or cuda}}
func.func @f() attributes {t = #meg.target<tpu, vector_bits = 128>} {
  return
}

// -----

// expected-error @+1 {{'meg.target' is only valid on a builtin.module}}
func.func @f() attributes {meg.target = #meg.target<cpu, vector_bits = 128>} {
  return
}

// -----

// expected-error @+1 {{'meg.target' expects a #meg.target attribute}}
module attributes {meg.target = "sm_90"} {
}

// -----

func.func @f(%q: tensor<1x8x4x32xf32>, %k: tensor<1x16x2x32xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'meg.attention' op takes query positions only with 'causal' (they place the causal mask)}}
  %0 = meg.attention %q, %k, %k positions(%pos : tensor<8xi32>) scale 0.125 : tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x4x32xf32>, %k: tensor<1x16x2x32xf32>, %pos: tensor<16xi32>) {
  // expected-error @+1 {{'meg.attention' op expects one position per query, [8] i32, got [16]}}
  %0 = meg.attention %q, %k, %k causal positions(%pos : tensor<16xi32>) scale 0.125 : tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
  return
}

// -----

func.func @f(%o: tensor<1x8x4x32xf32>, %q: tensor<1x8x4x32xf32>, %k: tensor<1x16x2x32xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'meg.attention_grad' op expects one position per query, [8] i32, got [4]}}
  %0:3 = meg.attention_grad %o, %q, %k, %k, %o causal positions(%pos : tensor<4xi32>) scale 0.125 : tensor<1x8x4x32xf32>, tensor<1x8x4x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>
  return
}

// -----

// The pass of a pipeline schedule an op runs in is one of forward,
// backward and weight, of a micro-batch.
func.func @bad_pipeline_pass(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.pipeline_pass' expects a pass of a pipeline schedule: "forward.mbI", "backward.mbI" or "weight.mbI"}}
  %y = meg.add %x, %x {meg.pipeline_pass = "forward.1"} : tensor<4xf32>, tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @bad_pipeline_pass_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'meg.pipeline_pass' expects a pass of a pipeline schedule}}
  %y = meg.add %x, %x {meg.pipeline_pass = "recompute.mb0"} : tensor<4xf32>, tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @good_pipeline_pass(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = meg.add %x, %x {meg.pipeline_pass = "weight.mb12"} : tensor<4xf32>, tensor<4xf32>
  return %y : tensor<4xf32>
}

// RUN: megc-opt %s --split-input-file --meg-pipeline-stages --verify-diagnostics --mlir-print-op-on-diagnostic=false | FileCheck %s

// Four equal layers over pp = 2 (balanced): the embedding's work goes with
// stage 0 and the LM head's, larger than a layer, with stage 1, so stage 0
// takes three layers. The cut is recorded on the module, and each
// parameter records the stages that hold it: its layer's, the embedding's
// first and the head's last; a table tied to both (the embedding read
// again by the head) is held by both.
// CHECK-LABEL: meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [3, 1]>
// CHECK: meg.param @emb {{.*}} {{.*}}meg.stages = array<i64: 0, 1>}
// CHECK: meg.param @w0 {{.*}} {meg.layer = 0 : i64, meg.stages = array<i64: 0>}
// CHECK: meg.param @w1 {{.*}} {meg.layer = 1 : i64, meg.stages = array<i64: 0>}
// CHECK: meg.param @w2 {{.*}} {meg.layer = 2 : i64, meg.stages = array<i64: 0>}
// CHECK: meg.param @w3 {{.*}} {meg.layer = 3 : i64, meg.stages = array<i64: 1>}
// CHECK: meg.param @head {{.*}} {meg.stages = array<i64: 1>}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"]>} {
  // expected-remark @+2 {{meg-pipeline-stages: stage 0: layers 0..2, cost 3136}}
  // expected-remark @+1 {{meg-pipeline-stages: stage 1: layers 3..3, cost 17921}}
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @loss(%ids: tensor<2x4xi32> {meg.name = "input_ids"}, %labels: tensor<2x4xi32> {meg.name = "labels"}) -> (tensor<f32> {meg.name = "loss"}) {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h3, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    %e2 = meg.param_ref @emb : tensor<64x8xf32>
    %l2 = meg.linear %h3, %e2 : tensor<2x4x8xf32>, tensor<64x8xf32>
    %s = meg.add %l, %l2 : tensor<2x4x64xf32>, tensor<2x4x64xf32>
    %c = meg.cross_entropy %s, %labels mean : tensor<2x4x64xf32>, tensor<2x4xi32>
    return %c : tensor<f32>
  }
}

// -----

// Given: one layer on stage 0, three on stage 1 (no remark: nothing is
// balanced).
// CHECK-LABEL: meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 3]>
// CHECK: meg.param @w0 {{.*}}meg.stages = array<i64: 0>
// CHECK: meg.param @w1 {{.*}}meg.stages = array<i64: 1>
// CHECK: meg.param @w3 {{.*}}meg.stages = array<i64: 1>
// CHECK: meg.param @head {{.*}}meg.stages = array<i64: 1>
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 3]>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h3, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// Uneven: five equal layers and no head over pp = 2; the embedding's work
// makes stage 0 the one with two.
// CHECK-LABEL: meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [2, 3]>
// CHECK: meg.param @emb {{.*}}meg.stages = array<i64: 0>
// CHECK: meg.param @w1 {{.*}}meg.stages = array<i64: 0>
// CHECK: meg.param @w2 {{.*}}meg.stages = array<i64: 1>
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"]>} {
  // expected-remark @+2 {{stage 0: layers 0..1, cost 2112}}
  // expected-remark @+1 {{stage 1: layers 2..4, cost 3072}}
  meg.mesh @world [dp_shard = 2, pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @w4 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 4 : i64}
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w4 = meg.param_ref @w4 {meg.layer = 4 : i64} : tensor<8x8xf32>
    %h4 = meg.linear %h3, %w4 {meg.layer = 4 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    return %h4 : tensor<2x4x8xf32>
  }
}

// -----

// Interleaved: pp = 2 with 2 virtual stages over 8 equal layers, two per
// stage; stage s runs on rank s % 2, so layers 4 and 5 are rank 0's second
// chunk.
// CHECK-LABEL: meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], virtual_stages = 2, layers = [2, 2, 2, 2]>
// CHECK: meg.param @w2 {{.*}}meg.stages = array<i64: 1>
// CHECK: meg.param @w4 {{.*}}meg.stages = array<i64: 2>
// CHECK: meg.param @w7 {{.*}}meg.stages = array<i64: 3>
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], virtual_stages = 2>} {
  // expected-remark @+4 {{stage 0: layers 0..1}}
  // expected-remark @+3 {{stage 1: layers 2..3}}
  // expected-remark @+2 {{stage 2: layers 4..5}}
  // expected-remark @+1 {{stage 3: layers 6..7}}
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @w4 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 4 : i64}
  meg.param @w5 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 5 : i64}
  meg.param @w6 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 6 : i64}
  meg.param @w7 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 7 : i64}
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w4 = meg.param_ref @w4 {meg.layer = 4 : i64} : tensor<8x8xf32>
    %h4 = meg.linear %h3, %w4 {meg.layer = 4 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w5 = meg.param_ref @w5 {meg.layer = 5 : i64} : tensor<8x8xf32>
    %h5 = meg.linear %h4, %w5 {meg.layer = 5 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w6 = meg.param_ref @w6 {meg.layer = 6 : i64} : tensor<8x8xf32>
    %h6 = meg.linear %h5, %w6 {meg.layer = 6 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w7 = meg.param_ref @w7 {meg.layer = 7 : i64} : tensor<8x8xf32>
    %h7 = meg.linear %h6, %w7 {meg.layer = 7 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    return %h7 : tensor<2x4x8xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: the model records no layers (meg.layer on its parameters): pipeline stages are cut at layers}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"]>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)>
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)>
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h1, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: 4 ranks x 1 virtual stages = 4 stages, but the model has 3 layers (a stage holds one at least)}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"]>} {
  meg.mesh @world [pp = 4]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h2, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: 2 ranks x 2 virtual stages = 4 stages, but the model has 3 layers (a stage holds one at least)}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], virtual_stages = 2>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h2, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: layers gives 3 stages, the pipeline has 2}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [1, 1, 2]>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h3, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: layers sums to 5, but the model has 4 layers}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [2, 3]>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h3, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// -----

// expected-error @+1 {{meg-pipeline-stages: stage 0 is given 0 layers; every stage holds one at least}}
module attributes {meg.pipeline = #meg.pipeline<mesh = @world, axes = ["pp"], layers = [0, 4]>} {
  meg.mesh @world [pp = 2]
  meg.param @emb : tensor<64x8xf32> init #meg.init<normal(0.02)>
  meg.param @w0 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
  meg.param @w1 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
  meg.param @w2 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
  meg.param @w3 : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
  meg.param @head : tensor<64x8xf32> init #meg.init<normal(0.02)>
  func.func @forward(%ids: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
    %e = meg.param_ref @emb : tensor<64x8xf32>
    %h = meg.embedding %e, %ids : tensor<64x8xf32>, tensor<2x4xi32>
    %w0 = meg.param_ref @w0 {meg.layer = 0 : i64} : tensor<8x8xf32>
    %h0 = meg.linear %h, %w0 {meg.layer = 0 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w1 = meg.param_ref @w1 {meg.layer = 1 : i64} : tensor<8x8xf32>
    %h1 = meg.linear %h0, %w1 {meg.layer = 1 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w2 = meg.param_ref @w2 {meg.layer = 2 : i64} : tensor<8x8xf32>
    %h2 = meg.linear %h1, %w2 {meg.layer = 2 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %w3 = meg.param_ref @w3 {meg.layer = 3 : i64} : tensor<8x8xf32>
    %h3 = meg.linear %h2, %w3 {meg.layer = 3 : i64} : tensor<2x4x8xf32>, tensor<8x8xf32>
    %wh = meg.param_ref @head : tensor<64x8xf32>
    %l = meg.linear %h3, %wh : tensor<2x4x8xf32>, tensor<64x8xf32>
    return %l : tensor<2x4x64xf32>
  }
}

// RUN: megc-opt %s -split-input-file --meg-outline-cuda-graphs | FileCheck %s --check-prefix=STEP
// RUN: megc-opt %s -split-input-file \
// RUN:   --meg-outline-cuda-graphs='scope=layer share-io-buffers' \
// RUN:   | FileCheck %s --check-prefix=LAYER
// RUN: megc-opt %s -split-input-file \
// RUN:   --meg-outline-cuda-graphs='scope=layer capture-collectives' \
// RUN:   | FileCheck %s --check-prefix=CAPTURE

meg.param @embed : tensor<16x8xf32> init #meg.init<normal(0.02)>
meg.param @model.layers.0.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
meg.param @model.layers.1.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
meg.param @model.layers.2.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 2 : i64}
meg.param @head : tensor<8x8xf32> init #meg.init<normal(0.02)>

// STEP-LABEL: func.func @forward
// STEP: %[[G:.*]] = meg.graph_region "forward.step"(%arg0)
// STEP-COUNT-5: meg.param_ref
// STEP: meg.yield
// STEP: return %[[G]]

// Three chained single-input/single-output layers: the second and third
// reuse the previous output buffer; embedding and head stay outside.
// LAYER-LABEL: func.func @forward
// LAYER: meg.linear %arg0
// LAYER: %[[L0:.*]] = meg.graph_region "layers.0.forward"(%{{.*}}) :
// LAYER: meg.param_ref @model.layers.0.w
// LAYER: meg.silu
// LAYER: %[[L1:.*]] = meg.graph_region "layers.1.forward" share_io(%[[L0]])
// LAYER: %[[L2:.*]] = meg.graph_region "layers.2.forward" share_io(%[[L1]])
// LAYER: meg.linear %[[L2]]
func.func @forward(%x: tensor<4x16xf32>) -> tensor<4x8xf32> {
  %e = meg.param_ref @embed : tensor<16x8xf32>
  %w0 = meg.param_ref @model.layers.0.w : tensor<8x8xf32>
  %w1 = meg.param_ref @model.layers.1.w : tensor<8x8xf32>
  %w2 = meg.param_ref @model.layers.2.w : tensor<8x8xf32>
  %hw = meg.param_ref @head : tensor<8x8xf32>
  %et = meg.transpose %e [1, 0] : tensor<16x8xf32>
  %h = meg.linear %x, %et : tensor<4x16xf32>, tensor<8x16xf32>
  %a0 = meg.linear %h, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %h0 = meg.silu %a0 : tensor<4x8xf32>
  %a1 = meg.linear %h0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
  %h1 = meg.silu %a1 : tensor<4x8xf32>
  %a2 = meg.linear %h1, %w2 : tensor<4x8xf32>, tensor<8x8xf32>
  %h2 = meg.silu %a2 : tensor<4x8xf32>
  %y = meg.linear %h2, %hw : tensor<4x8xf32>, tensor<8x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

meg.mesh @world [dp = 2]
meg.submesh @world[dp]
meg.param @model.layers.0.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}

// A collective splits the step; without capture-collectives it stays
// outside (meg-outline-cuda-graphs-remarks.mlir checks the remark).
// STEP-LABEL: func.func @with_collective
// STEP: meg.graph_region "with_collective.step.0"
// STEP: meg.all_reduce
// STEP: meg.graph_region "with_collective.step.1"
// LAYER-LABEL: func.func @with_collective
// LAYER: meg.graph_region "layers.0.forward"
// LAYER: meg.all_reduce
// LAYER: meg.graph_region "layers.0.backward"
// With capture-collectives the layer's graph holds it.
// CAPTURE-LABEL: func.func @with_collective
// CAPTURE: meg.graph_region "layers.0.forward"
// CAPTURE: meg.linear
// CAPTURE: meg.all_reduce
// CAPTURE: meg.linear
// CAPTURE: meg.yield
// CAPTURE-NEXT: }
// CAPTURE-NEXT: return
func.func @with_collective(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = meg.param_ref @model.layers.0.w : tensor<8x8xf32>
  %a = meg.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %r = meg.all_reduce %a over @world[dp] sum : tensor<4x8xf32>
  %b = meg.linear %r, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

meg.param frozen @model.layers.0.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}
meg.param @model.layers.1.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 1 : i64}
meg.param @head : tensor<8x8xf32> init #meg.init<normal(0.02)>

// In a function with a backward, the frozen layer's forward graph is
// forward-only (it gets no backward graph); the head between forward and
// backward reads no layer's parameter and stays outside.
// LAYER-LABEL: func.func @train
// LAYER: meg.graph_region "layers.0.forward" forward_only
// LAYER: meg.graph_region "layers.1.forward" share_io(
// LAYER: meg.linear {{.*}} : tensor<4x8xf32>, tensor<8x8xf32>
// LAYER: meg.graph_region "layers.1.backward"
// LAYER-NOT: layers.0.backward
func.func @train(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w0 = meg.param_ref @model.layers.0.w : tensor<8x8xf32>
  %w1 = meg.param_ref @model.layers.1.w : tensor<8x8xf32>
  %hw = meg.param_ref @head : tensor<8x8xf32>
  %a = meg.linear %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %b = meg.linear %a, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
  %y = meg.linear %b, %hw : tensor<4x8xf32>, tensor<8x8xf32>
  %g = meg.matmul %y, %w1 transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Layers are the ones the model's builder recorded (meg.layer), never read
// from names: @blocks.7.w, named like a layer but without meg.layer, belongs
// to none, and @attn_w and @mlp_w, named like no layer, are layer 3.
meg.param @blocks.7.w : tensor<8x8xf32> init #meg.init<normal(0.02)>
meg.param @attn_w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}
meg.param @mlp_w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 3 : i64}

// LAYER-LABEL: func.func @recorded
// LAYER: meg.linear %arg0
// LAYER: meg.graph_region "layers.3.forward"
// LAYER: meg.param_ref @attn_w
// LAYER: meg.param_ref @mlp_w
// LAYER-NOT: meg.graph_region
// LAYER: return
func.func @recorded(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = meg.param_ref @blocks.7.w : tensor<8x8xf32>
  %a = meg.param_ref @attn_w : tensor<8x8xf32>
  %m = meg.param_ref @mlp_w : tensor<8x8xf32>
  %0 = meg.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %1 = meg.linear %0, %a : tensor<4x8xf32>, tensor<8x8xf32>
  %2 = meg.linear %1, %m : tensor<4x8xf32>, tensor<8x8xf32>
  return %2 : tensor<4x8xf32>
}

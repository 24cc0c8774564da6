// Shape of the IR that convert-meg-to-linalg produces, and its diagnostics.
// RUN: megc-opt %s --convert-meg-to-linalg --split-input-file | FileCheck %s

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @broadcast_add
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<2x8xf32>)
// CHECK: arith.addf
// CHECK-NOT: meg.
func.func @broadcast_add(%a: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = meg.add %a, %b : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// bf16 is computed in f32 and rounded once on store.
// CHECK-LABEL: func.func @bf16_silu
// CHECK: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16):
// CHECK: %[[X:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK: math.exp
// CHECK: %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @bf16_silu(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = meg.silu %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Data movement becomes tensor ops (views after bufferization).
// CHECK-LABEL: func.func @movement
// CHECK: tensor.extract_slice %{{.*}}[0, 1] [2, 4] [1, 2]
// CHECK: tensor.insert_slice
// CHECK: tensor.insert_slice
// CHECK: tensor.reshape
func.func @movement(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = meg.slice %x [0, 1] [2, 4] [1, 2] : tensor<2x8xf32>
  %1 = meg.concat %0, %0 axis 1 : tensor<2x4xf32>, tensor<2x4xf32>
  %2 = meg.reshape %1 : tensor<2x8xf32> to tensor<16xf32>
  return %2 : tensor<16xf32>
}

// -----

// Parameter reads and collectives are left for the program lowering.
// CHECK-LABEL: func.func @kept
// CHECK: meg.param_ref @w
// CHECK: meg.all_reduce
meg.mesh @world [dp = 2]
meg.submesh @world[dp]
meg.param @w : tensor<4xf32> init #meg.init<zeros>
func.func @kept() -> tensor<4xf32> {
  %w = meg.param_ref @w : tensor<4xf32>
  %0 = meg.all_reduce %w over @world[dp] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Backward ops lower too: the RoPE transpose reads the gradient and sin at
// the partner channel (the other half, -d3 + 1), and adds
// dy * cos + (first half ? dy' * sin' : -(dy' * sin')).
// CHECK-DAG: #[[PARTNER:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, -d3 + 1, d4)>
// CHECK-DAG: #[[SINP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, -d3 + 1, d4)>
// CHECK-LABEL: func.func @rope_grad
// CHECK: linalg.generic {indexing_maps = [#{{[a-z0-9]+}}, #[[PARTNER]], #{{[a-z0-9]+}}, #[[SINP]], #{{[a-z0-9]+}}]
// CHECK-NEXT: ^bb0(%[[DY:.*]]: f32, %[[DYP:.*]]: f32, %[[COS:.*]]: f32, %[[SIN:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[T:.*]] = arith.mulf %[[DYP]], %[[SIN]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[T]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %[[FIRST]], %[[T]], %[[N]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.mulf %[[DY]], %[[COS]] : f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[D]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[SUM]]
// CHECK-NOT: meg.rope_grad
func.func @rope_grad(%dy: tensor<1x2x1x4xf32>, %c: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<1x2x1x4xf32> {
  %0 = meg.rope_grad %dy, %c, %s layout bshd : tensor<1x2x1x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  return %0 : tensor<1x2x1x4xf32>
}

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

// -----

// An ignored label: the per-token loss, the count and the gradient row are
// selected by `label != -100` (the row's loss and gradient 0, its count 0).
// CHECK-LABEL: func.func @loss_ignoring_padding
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T:arg1]] : tensor<2xf32>, tensor<2xf32>, tensor<2xi32>)
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %[[LABEL:.*]]: i32, %{{.*}}: f32):
// CHECK: %[[LOSS:.*]] = arith.subf
// CHECK: %[[IGNORE:.*]] = arith.constant -100 : i32
// CHECK: %[[COUNTS:.*]] = arith.cmpi ne, %[[LABEL]], %[[IGNORE]] : i32
// CHECK: arith.select %[[COUNTS]], %[[LOSS]], %{{.*}} : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[T]] : tensor<2xi32>)
// CHECK: ^bb0(%[[L2:.*]]: i32, %[[ACC:.*]]: f32):
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[C2:.*]] = arith.cmpi ne, %[[L2]], %{{.*}} : i32
// CHECK: %[[ADD:.*]] = arith.select %[[C2]], %[[ONE]], %[[ZERO]] : f32
// CHECK: arith.addf %[[ACC]], %[[ADD]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %[[L3:.*]]: i32, %[[DLOSS:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[SHIFTED:.*]] = arith.select
// CHECK: %[[SCALE:.*]] = arith.mulf %[[DLOSS]]
// CHECK: %[[C3:.*]] = arith.cmpi ne, %[[L3]], %{{.*}} : i32
// CHECK: %[[KEPT:.*]] = arith.select %[[C3]], %[[SCALE]], %{{.*}} : f32
// CHECK: arith.mulf %[[SHIFTED]], %[[KEPT]]
func.func @loss_ignoring_padding(%l: tensor<2x8xf32>, %t: tensor<2xi32>) -> (tensor<f32>, tensor<f32>, tensor<2x8xf32>) {
  %s = meg.cross_entropy %l, %t sum ignore -100 : tensor<2x8xf32>, tensor<2xi32>
  %n = meg.label_count %t ignore -100 : tensor<2xi32>
  %g = meg.cross_entropy_grad %n, %l, %t sum ignore -100 : tensor<2x8xf32>, tensor<2xi32>
  return %s, %n, %g : tensor<f32>, tensor<f32>, tensor<2x8xf32>
}

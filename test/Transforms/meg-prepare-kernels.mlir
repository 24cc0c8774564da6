// RUN: megc-opt %s --meg-prepare-kernels | FileCheck %s

// The elementwise producer merges into its only consumer (one loop nest),
// and the returned argument is copied into a tensor of its own, so that
// bufferization makes every result an out-parameter the kernel writes.
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[X:.*]]: tensor<8xf32>)
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[IN]] : f32
// CHECK-NEXT: %[[M:.*]] = math.exp %[[N]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK-NOT: linalg.generic
// CHECK: %[[C:.*]] = linalg.copy ins(%[[X]] : tensor<8xf32>)
// CHECK: return %[[E]], %[[C]]

#id = affine_map<(d0) -> (d0)>
func.func @k(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e0 = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = math.exp %in : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  return %b, %x : tensor<8xf32>, tensor<8xf32>
}

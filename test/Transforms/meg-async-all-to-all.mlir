// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-async-all-to-all))' | FileCheck %s

// The dispatch starts right after its input exists, the shared work runs,
// and the wait sits right before the first reader; the combine has nothing
// to overlap (its wait follows its start), and an exchange whose result
// nobody reads starts after the earlier exchanges (in order) and is waited
// for before the return.
// CHECK-LABEL: func.func @moe
// CHECK: %[[SLOTS:.*]] = meg.mul %arg0, %arg0
// CHECK-NEXT: %[[F:.*]] = meg.all_to_all_start %[[SLOTS]] over @world[ep] : tensor<4x2xf32> -> !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[SHARED:.*]] = meg.add %arg1, %arg1
// CHECK-NEXT: %[[MORE:.*]] = meg.mul %[[SHARED]], %[[SHARED]]
// CHECK-NEXT: %[[MINE:.*]] = meg.wait %[[F]] : !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[OUT:.*]] = meg.neg %[[MINE]]
// CHECK-NEXT: %[[G:.*]] = meg.all_to_all_start %[[OUT]] over @world[ep]
// CHECK-NEXT: %[[BACK:.*]] = meg.wait %[[G]]
// CHECK-NEXT: %[[H:.*]] = meg.all_to_all_start %arg1 over @world[ep]
// CHECK-NEXT: meg.add %[[BACK]], %[[MORE]]
// CHECK-NEXT: meg.wait %[[H]]
// CHECK-NEXT: return
meg.mesh @world [ep = 2]
meg.submesh @world[ep]
func.func @moe(%x: tensor<4x2xf32>, %y: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %slots = meg.mul %x, %x : tensor<4x2xf32>, tensor<4x2xf32>
  %shared = meg.add %y, %y : tensor<4x2xf32>, tensor<4x2xf32>
  %more = meg.mul %shared, %shared : tensor<4x2xf32>, tensor<4x2xf32>
  %mine = meg.all_to_all %slots over @world[ep] : tensor<4x2xf32>
  %out = meg.neg %mine : tensor<4x2xf32>
  %back = meg.all_to_all %out over @world[ep] : tensor<4x2xf32>
  %sum = meg.add %back, %more : tensor<4x2xf32>, tensor<4x2xf32>
  %unused = meg.all_to_all %y over @world[ep] : tensor<4x2xf32>
  return %sum : tensor<4x2xf32>
}

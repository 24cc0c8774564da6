// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-async-collectives))' | FileCheck %s

// The dispatch starts right after its input exists, the shared work runs,
// and the wait sits right before the first reader; the combine has nothing
// to overlap and stays blocking, and an exchange whose result nobody reads
// starts after the earlier exchanges (in order) and is waited for before
// the return.
// CHECK-LABEL: func.func @moe
// CHECK: %[[SLOTS:.*]] = meg.mul %arg0, %arg0
// CHECK-NEXT: %[[F:.*]] = meg.all_to_all_start %[[SLOTS]] over @world[ep] : tensor<4x2xf32> -> !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[SHARED:.*]] = meg.add %arg1, %arg1
// CHECK-NEXT: %[[MORE:.*]] = meg.mul %[[SHARED]], %[[SHARED]]
// CHECK-NEXT: %[[MINE:.*]] = meg.wait %[[F]] : !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[OUT:.*]] = meg.neg %[[MINE]]
// CHECK-NEXT: %[[BACK:.*]] = meg.all_to_all %[[OUT]] over @world[ep]
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

// Tensor parallelism's backward: the input gradient's all-reduce over tp
// runs while the weight gradient is computed; a reduce-scatter and an
// all-gather along their dims likewise. An all-gather stored into a
// parameter stays blocking (the lowering gathers it into the parameter's
// storage); the second all-reduce overlaps that gather.
// CHECK-LABEL: func.func @tp
// CHECK: %[[DX:.*]] = meg.matmul %arg0, %arg1
// CHECK-NEXT: %[[F:.*]] = meg.all_reduce_start %[[DX]] over @grid[tp] sum : tensor<4x2xf32> -> !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[DW:.*]] = meg.matmul %arg0, %arg2
// CHECK-NEXT: %[[RS:.*]] = meg.reduce_scatter_start %[[DW]] over @grid[tp] dim 0 sum : tensor<4x2xf32> -> !meg.future<tensor<2x2xf32>>
// CHECK-NEXT: %[[AG:.*]] = meg.all_gather_start %arg3 over @grid[tp] dim 0 : tensor<2x2xf32> -> !meg.future<tensor<4x2xf32>>
// CHECK-NEXT: %[[NEG:.*]] = meg.neg %arg2
// CHECK-NEXT: %[[SUM:.*]] = meg.wait %[[F]]
// CHECK-NEXT: %[[G:.*]] = meg.all_reduce_start %[[SUM]] over @grid[tp] avg
// CHECK-NEXT: %[[W:.*]] = meg.all_gather %arg3 over @grid[tp] dim 0 : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: meg.param_store @w, %[[W]]
// CHECK-NEXT: %[[NOW:.*]] = meg.wait %[[G]]
// CHECK-NEXT: %[[OUT:.*]] = meg.add %[[NOW]], %[[NEG]]
// CHECK-NEXT: %[[PIECE:.*]] = meg.wait %[[RS]]
// CHECK-NEXT: %[[WHOLE:.*]] = meg.wait %[[AG]]
// CHECK-NEXT: return %[[OUT]], %[[PIECE]], %[[WHOLE]]
meg.mesh @grid [tp = 2]
meg.submesh @grid[tp]
meg.param @w : tensor<4x2xf32> init #meg.init<zeros>
func.func @tp(%dy: tensor<4x4xf32>, %w: tensor<4x2xf32>, %x: tensor<4x2xf32>, %piece: tensor<2x2xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>, tensor<4x2xf32>) {
  %dx = meg.matmul %dy, %w : tensor<4x4xf32>, tensor<4x2xf32>
  %sum = meg.all_reduce %dx over @grid[tp] sum : tensor<4x2xf32>
  %dw = meg.matmul %dy, %x : tensor<4x4xf32>, tensor<4x2xf32>
  %rs = meg.reduce_scatter %dw over @grid[tp] dim 0 sum : tensor<4x2xf32> -> tensor<2x2xf32>
  %ag = meg.all_gather %piece over @grid[tp] dim 0 : tensor<2x2xf32> -> tensor<4x2xf32>
  %neg = meg.neg %x : tensor<4x2xf32>
  %now = meg.all_reduce %sum over @grid[tp] avg : tensor<4x2xf32>
  %wg = meg.all_gather %piece over @grid[tp] dim 0 : tensor<2x2xf32> -> tensor<4x2xf32>
  meg.param_store @w, %wg : tensor<4x2xf32>
  %out = meg.add %now, %neg : tensor<4x2xf32>, tensor<4x2xf32>
  return %out, %rs, %ag : tensor<4x2xf32>, tensor<2x2xf32>, tensor<4x2xf32>
}

// The sum of an input gradient's contributions, left by the update
// scheduling after the weight gradient and its update, moves up to right
// after its last contribution: its all-reduce then starts before the
// weight gradient, which overlaps it.
// CHECK-LABEL: func.func @late_sum
// CHECK: %[[DX1:.*]] = meg.matmul %arg0, %arg1
// CHECK-NEXT: %[[DX2:.*]] = meg.matmul %arg0, %arg2
// CHECK-NEXT: %[[SUM:.*]] = meg.add %[[DX1]], %[[DX2]]
// CHECK-NEXT: %[[F:.*]] = meg.all_reduce_start %[[SUM]] over @grid[tp] sum
// CHECK-NEXT: %[[DW:.*]] = meg.matmul %arg0, %arg3 transpose_lhs
// CHECK-NEXT: %[[UPDATED:.*]] = meg.sub %arg2, %[[DW]]
// CHECK-NEXT: %[[DONE:.*]] = meg.wait %[[F]]
// CHECK-NEXT: meg.neg %[[DONE]]
func.func @late_sum(%dy: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %dx1 = meg.matmul %dy, %w1 : tensor<4x4xf32>, tensor<4x4xf32>
  %dx2 = meg.matmul %dy, %w2 : tensor<4x4xf32>, tensor<4x4xf32>
  %dw = meg.matmul %dy, %x transpose_lhs : tensor<4x4xf32>, tensor<4x4xf32>
  %updated = meg.sub %w2, %dw : tensor<4x4xf32>, tensor<4x4xf32>
  %sum = meg.add %dx1, %dx2 : tensor<4x4xf32>, tensor<4x4xf32>
  %reduced = meg.all_reduce %sum over @grid[tp] sum : tensor<4x4xf32>
  %out = meg.neg %reduced : tensor<4x4xf32>
  return %out, %updated : tensor<4x4xf32>, tensor<4x4xf32>
}

// A ring's next block moves while the current one is attended to: each
// shift starts right after its input exists and is waited for right
// before the attention that reads it.
// CHECK-LABEL: func.func @ring
// CHECK-NEXT: %[[FK:.*]] = meg.shift_start %arg1 over @cpring[cp] by 1 : tensor<1x4x1x4xf32> -> !meg.future<tensor<1x4x1x4xf32>>
// CHECK-NEXT: %[[FV:.*]] = meg.shift_start %arg2 over @cpring[cp] by 1
// CHECK-NEXT: %[[O0:.*]] = meg.attention %arg0, %arg1, %arg2 causal
// CHECK-NEXT: %[[K1:.*]] = meg.wait %[[FK]]
// CHECK-NEXT: %[[V1:.*]] = meg.wait %[[FV]]
// CHECK-NEXT: %[[O1:.*]] = meg.attention %arg0, %[[K1]], %[[V1]] causal positions
// CHECK-NEXT: meg.add %[[O0]], %[[O1]]
meg.mesh @cpring [cp = 2]
meg.submesh @cpring[cp]
func.func @ring(%q: tensor<1x4x2x4xf32>, %k: tensor<1x4x1x4xf32>, %v: tensor<1x4x1x4xf32>, %p: tensor<4xi32>) -> tensor<1x4x2x4xf32> {
  %k1 = meg.shift %k over @cpring[cp] by 1 : tensor<1x4x1x4xf32>
  %v1 = meg.shift %v over @cpring[cp] by 1 : tensor<1x4x1x4xf32>
  %o0 = meg.attention %q, %k, %v causal scale 0.5 : tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
  %o1 = meg.attention %q, %k1, %v1 causal positions(%p : tensor<4xi32>) scale 0.5 : tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
  %sum = meg.add %o0, %o1 : tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>
  return %sum : tensor<1x4x2x4xf32>
}

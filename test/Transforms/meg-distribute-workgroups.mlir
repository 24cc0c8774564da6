// RUN: megc-opt %s -split-input-file --meg-distribute-workgroups | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Pointwise: one dispatch of 4 workgroups; each takes 16 rows of every
// operand (workgroup w starts at row 16 w).
// CHECK-DAG: #[[ROWS16:.*]] = affine_map<(d0) -> (d0 * 16)>
// CHECK-LABEL: func.func @pointwise
// CHECK: scf.forall (%[[WG:.*]]) in (4) {
// CHECK-NEXT: %[[ROW:.*]] = affine.apply #[[ROWS16]](%[[WG]])
// CHECK-NEXT: memref.subview %{{.*}}[%[[ROW]], 0] [16, 128] [1, 1]
// CHECK-NEXT: memref.subview %{{.*}}[%[[ROW]], 0] [16, 128] [1, 1]
// CHECK-NEXT: linalg.generic
// CHECK-SAME: memref<16x128xf32, strided<[128, 1], offset: ?>>
// CHECK-NOT: scf.forall
func.func @pointwise(%x: memref<64x128xf32>, %y: memref<64x128xf32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [64, 128], tile = [16, 128], vector = 4>} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x128xf32>) outs(%y : memref<64x128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Row reduction: the row sums and the normalised output share one dispatch
// (each workgroup reads its rows for both), the sums a temporary of the
// kernel (its scratch), written and read per workgroup tile.
// CHECK-LABEL: func.func @row_reduction
// CHECK: %[[SUMS:.*]] = memref.alloc() : memref<64xf32>
// CHECK: scf.forall (%[[WG:.*]]) in (8) {
// CHECK: %[[ROW:.*]] = affine.apply
// CHECK: %[[PART:.*]] = memref.subview %[[SUMS]][%[[ROW]]] [8] [1]
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[PART]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-NOT: scf.forall
func.func @row_reduction(%x: memref<64x128xf32>, %y: memref<64x128xf32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<row_reduction, domain = [64], tile = [8], vector = 4>} {
  %zero = arith.constant 0.0 : f32
  %sums = memref.alloc() : memref<64xf32>
  linalg.fill ins(%zero : f32) outs(%sums : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x128xf32>) outs(%sums : memref<64xf32>) {
  ^bb0(%a: f32, %s: f32):
    %t = arith.addf %s, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sums : memref<64x128xf32>, memref<64xf32>) outs(%y : memref<64x128xf32>) {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %q = arith.divf %a, %s : f32
    linalg.yield %q : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>

// Column reduction: the input gradient and the weight gradient read the
// same rows in one dispatch; each of the 4 workgroups sums its 16 rows into
// its row of a [4, 128] partials buffer (starting from the sum's neutral
// element), and a second dispatch adds the 4 partials to the output's
// initial value in workgroup order. The output's fill moves ahead.
// CHECK-LABEL: func.func @column_reduction
// CHECK-SAME: %[[DW:[a-z0-9]+]]: memref<128xf32>)
// CHECK: %[[PARTIALS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x128xf32>
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[DW]]
// CHECK: scf.forall (%[[WG:.*]]) in (4) {
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: %[[MINE:.*]] = memref.subview %[[PARTIALS]][%[[WG]], 0] [1, 128] [1, 1] : memref<4x128xf32> to memref<128xf32
// CHECK-NEXT: %[[NEUTRAL:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: linalg.fill ins(%[[NEUTRAL]] : f32) outs(%[[MINE]]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK-SAME: outs(%[[MINE]]
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%{{.*}} : memref<4x128xf32{{.*}}>) outs(%{{.*}} : memref<128xf32
// CHECK: arith.addf %out, %in
func.func @column_reduction(%x: memref<64x128xf32>, %dy: memref<64x128xf32>, %dx: memref<64x128xf32>, %dw: memref<128xf32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<column_reduction, domain = [64, 128], tile = [16, 128], vector = 4>} {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %dy : memref<64x128xf32>, memref<64x128xf32>) outs(%dx : memref<64x128xf32>) {
  ^bb0(%a: f32, %g: f32, %b: f32):
    %p = arith.mulf %a, %g : f32
    linalg.yield %p : f32
  }
  linalg.fill ins(%zero : f32) outs(%dw : memref<128xf32>)
  linalg.generic {indexing_maps = [#id, #id, #cols], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : memref<64x128xf32>, memref<64x128xf32>) outs(%dw : memref<128xf32>) {
  ^bb0(%a: f32, %g: f32, %s: f32):
    %p = arith.mulf %a, %g : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#all = affine_map<(d0, d1) -> ()>

// Full reduction: 32 partial sums, then their sum into the scalar, in
// order, after its initial value.
// CHECK-LABEL: func.func @full_reduction
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<32xf32>
// CHECK: scf.forall (%{{.*}}) in (32) {
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK-SAME: memref<16x1024xf32
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]
// CHECK-SAME: ins(%{{.*}} : memref<32xf32>)
func.func @full_reduction(%x: memref<512x1024xf32>, %loss: memref<f32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<full_reduction, domain = [512, 1024], tile = [16, 1024], vector = 4>} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%loss : memref<f32>)
  linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<512x1024xf32>) outs(%loss : memref<f32>) {
  ^bb0(%a: f32, %s: f32):
    %t = arith.addf %s, %a : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A step that is not a loop nest runs as written, in a dispatch of one
// workgroup, after the nests before it.
// CHECK-LABEL: func.func @scatter
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: scf.for
// CHECK-NOT: scf.forall
func.func @scatter(%ids: memref<4xindex>, %table: memref<16xf32>) attributes {
    meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [], tile = [], vector = 4>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.for %t = %c0 to %c4 step %c1 {
    %i = memref.load %ids[%t] : memref<4xindex>
    %v = memref.load %table[%i] : memref<16xf32>
    %w = arith.addf %v, %one : f32
    memref.store %w, %table[%i] : memref<16xf32>
  }
  return
}

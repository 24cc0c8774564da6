// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu | FileCheck %s
// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu=threads-per-block=128 | FileCheck %s --check-prefix=SMALL

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows16 = affine_map<(d0) -> (d0 * 16)>

// Pointwise: one block per workgroup. Rows of 128 f32 split into 4-element
// (16-byte) vectors, so where both views are 16-byte aligned (checked once,
// from each view's pointer and offset) thread t takes vectors t, t + 256,
// ... of its workgroup's 16 x 128 tile, loaded and stored as vector<4xf32>
// with the body once per lane; otherwise elements t, t + 256, ...
// CHECK-LABEL: func.func @pointwise
// CHECK-DAG: %[[T:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[G:.*]] = arith.constant 4 : index
// CHECK: gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[G]], {{.*}}) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[T]],
// CHECK: affine.apply #{{.*}}[%[[B]]]
// CHECK: %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[X:[a-z_0-9]+]]
// CHECK: %{{.*}}, %[[XO:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[X]]
// CHECK: %[[XB:.*]] = arith.muli %[[XO]], %c4
// CHECK: %[[XA:.*]] = arith.addi %[[XP]], %[[XB]]
// CHECK: arith.remui %[[XA]], %c16
// CHECK: memref.extract_aligned_pointer_as_index %[[Y:[a-z_0-9]+]]
// CHECK: %[[OK:.*]] = arith.andi
// CHECK: scf.if %[[OK]] {
// CHECK: scf.for %[[V:.*]] = %[[TID]] to %c512{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: %[[FIRST:.*]] = arith.muli %[[V]], %c4
// CHECK: %[[VEC:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : {{.*}}, vector<4xf32>
// CHECK-COUNT-4: arith.negf
// CHECK: %[[OUT:.*]] = vector.from_elements {{.*}} : vector<4xf32>
// CHECK: vector.store %[[OUT]], %[[Y]][%{{.*}}, %{{.*}}] {alignment = 16 : i64}
// CHECK: } else {
// CHECK: scf.for %[[I:.*]] = %[[TID]] to %c2048{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: arith.remui %[[I]]
// CHECK: memref.load
// CHECK: arith.negf
// CHECK: memref.store
// CHECK-NOT: gpu.barrier
// CHECK-NOT: linalg
// CHECK: gpu.terminator
// SMALL-LABEL: func.func @pointwise
// SMALL: threads({{.*}}) in (%{{.*}} = %c128{{(_[0-9]+)?}}
func.func @pointwise(%x: memref<64x128xf32>, %y: memref<64x128xf32>) {
  scf.forall (%wg) in (4) {
    %row = affine.apply #rows16(%wg)
    %a = memref.subview %x[%row, 0] [16, 128] [1, 1] : memref<64x128xf32> to memref<16x128xf32, strided<[128, 1], offset: ?>>
    %b = memref.subview %y[%row, 0] [16, 128] [1, 1] : memref<64x128xf32> to memref<16x128xf32, strided<[128, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%a : memref<16x128xf32, strided<[128, 1], offset: ?>>)
        outs(%b : memref<16x128xf32, strided<[128, 1], offset: ?>>) {
    ^bb0(%in: f32, %out: f32):
      %n = arith.negf %in : f32
      linalg.yield %n : f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Vectors of the widest element: an f32 input and a bf16 output make
// 4-element vectors (16 bytes of f32, 8 of bf16, each aligned to its own
// size); the weight, contiguous along the row, is a vector too, and the
// row scale, the same for every lane, one scalar load per vector. The
// index of the innermost loop is the vector's first plus the lane.
// CHECK-LABEL: func.func @mixed_widths
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: arith.remui %{{.*}}, %c8
// CHECK: scf.if
// CHECK: %[[X:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<4x64xf32>, vector<4xf32>
// CHECK: %[[W:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<64xf32>, vector<4xf32>
// CHECK: %[[S:.*]] = memref.load %{{.*}} : memref<4xf32>
// CHECK: vector.extract %[[X]][0]
// CHECK: vector.extract %[[W]][0]
// CHECK: arith.mulf
// CHECK: arith.mulf %{{.*}}, %[[S]]
// CHECK: arith.truncf
// CHECK: %[[LANE3:.*]] = arith.addi %{{.*}}, %c3
// CHECK: arith.index_cast %[[LANE3]]
// CHECK: vector.from_elements {{.*}} : vector<4xbf16>
// CHECK: vector.store {{.*}} {alignment = 8 : i64} : memref<4x64xbf16>, vector<4xbf16>
// CHECK: } else {
func.func @mixed_widths(%x: memref<4x64xf32>, %w: memref<64xf32>, %s: memref<4xf32>, %y: memref<4x64xbf16>) {
  scf.forall (%wg) in (1) {
    linalg.generic {indexing_maps = [#id, #cols, #rows, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %w, %s : memref<4x64xf32>, memref<64xf32>, memref<4xf32>)
        outs(%y : memref<4x64xbf16>) {
    ^bb0(%a: f32, %b: f32, %c: f32, %out: bf16):
      %j = linalg.index 1 : index
      %ji = arith.index_cast %j : index to i32
      %jf = arith.sitofp %ji : i32 to f32
      %p = arith.mulf %a, %b : f32
      %q = arith.mulf %p, %c : f32
      %r = arith.addf %q, %jf : f32
      %t = arith.truncf %r : f32 to bf16
      linalg.yield %t : bf16
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// No vectors where a row does not split into whole vectors (6 f32) or an
// operand is read across the innermost loop (a transpose): the element
// loop alone.
// CHECK-LABEL: func.func @not_vectorized
// CHECK-NOT: vector.
// CHECK-NOT: scf.if
// CHECK: gpu.terminator
// CHECK-NOT: vector.
// CHECK: gpu.terminator
func.func @not_vectorized(%x: memref<8x6xf32>, %y: memref<8x6xf32>, %a: memref<64x64xf32>, %b: memref<64x64xf32>) {
  scf.forall (%wg) in (1) {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<8x6xf32>) outs(%y : memref<8x6xf32>) {
    ^bb0(%in: f32, %out: f32):
      %n = arith.negf %in : f32
      linalg.yield %n : f32
    }
  }
  scf.forall (%wg) in (1) {
    linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
        ins(%a : memref<64x64xf32>) outs(%b : memref<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Row reduction, one long row per workgroup: a block per row. Each thread
// sums every 256th element of the row from zero, gpu.all_reduce combines
// the threads' partials, a barrier keeps the next row from overwriting
// the reduction's buffer, and the first thread adds the total to the
// output. The fill before it is separated by a barrier.
// CHECK-LABEL: func.func @block_per_row
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c2{{(_[0-9]+)?}},
// CHECK: scf.for %{{.*}} = %[[TID:[a-z_0-9]+]] to %c1{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: memref.store %cst{{(_[0-9]+)?}}
// CHECK: gpu.barrier
// CHECK: %[[P:.*]] = scf.for %[[R:.*]] = %[[TID]] to %c4096{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} iter_args(%[[A:.*]] = %cst{{(_[0-9]+)?}}) -> (f32) {
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}, %[[R]]]
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[V]] : f32
// CHECK: scf.yield %[[S]] : f32
// CHECK: %[[TOTAL:.*]] = gpu.all_reduce add %[[P]] uniform {
// CHECK-NEXT: } : (f32) -> f32
// CHECK-NEXT: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %c0{{(_[0-9]+)?}}
// CHECK: scf.if %[[FIRST]] {
// CHECK: %[[OLD:.*]] = memref.load
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[TOTAL]] : f32
// CHECK: memref.store %[[NEW]]
// CHECK-NOT: gpu.subgroup_reduce
func.func @block_per_row(%x: memref<2x4096xf32>, %s: memref<2xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%wg) in (2) {
    %a = memref.subview %x[%wg, 0] [1, 4096] [1, 1] : memref<2x4096xf32> to memref<1x4096xf32, strided<[4096, 1], offset: ?>>
    %b = memref.subview %s[%wg] [1] [1] : memref<2xf32> to memref<1xf32, strided<[1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%b : memref<1xf32, strided<[1], offset: ?>>)
    linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<1x4096xf32, strided<[4096, 1], offset: ?>>)
        outs(%b : memref<1xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.addf %acc, %in : f32
      linalg.yield %t : f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Row reduction, as many rows per workgroup as the block has warps or
// more: a warp per row. Warp w takes rows w, w + 8, ...; its lanes stride
// over the row by 32 and meet in a gpu.subgroup_reduce (no barrier), and
// lane 0 folds the maximum into the output.
// CHECK-LABEL: func.func @warp_per_row
// CHECK-DAG: %[[LANE:.*]] = arith.remui %[[TID:.*]], %c32{{(_[0-9]+)?}} : index
// CHECK-DAG: %[[WARP:.*]] = arith.divui %[[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.*}} = %[[WARP]] to %c16{{(_[0-9]+)?}} step %c8{{(_[0-9]+)?}} {
// CHECK: %[[P:.*]] = scf.for %{{.*}} = %[[LANE]] to %c128{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args(%{{.*}} = %cst{{(_[0-9]+)?}}) -> (f32) {
// CHECK: arith.maximumf
// CHECK: %[[M:.*]] = gpu.subgroup_reduce maximumf %[[P]] uniform : (f32) -> f32
// CHECK-NEXT: arith.cmpi eq, %[[LANE]], %c0{{(_[0-9]+)?}}
// CHECK: arith.maximumf %{{.*}}, %[[M]] : f32
// CHECK-NOT: gpu.barrier
// CHECK-NOT: gpu.all_reduce
// SMALL-LABEL: func.func @warp_per_row
// SMALL: scf.for %{{.*}} = %{{.*}} to %c16{{(_[0-9]+)?}} step %c4{{(_[0-9]+)?}} {
func.func @warp_per_row(%x: memref<64x128xf32>, %m: memref<64xf32>) {
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 16)>(%wg)
    %a = memref.subview %x[%row, 0] [16, 128] [1, 1] : memref<64x128xf32> to memref<16x128xf32, strided<[128, 1], offset: ?>>
    %b = memref.subview %m[%row] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<16x128xf32, strided<[128, 1], offset: ?>>)
        outs(%b : memref<16xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.maximumf %acc, %in : f32
      linalg.yield %t : f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Online softmax statistics (meg-online-softmax's nest), a warp per row:
// each lane folds its elements into a (maximum, sum) pair from (-inf, 0)
// with the nest's body, the pairs meet in xor shuffles at distances 1 to
// 16 (two per distance, rescaling the sum with one exponential), and lane
// 0 folds the row's pair into both outputs. No shared memory, no barrier.
// CHECK-LABEL: func.func @online_softmax_warp_per_row
// CHECK-DAG: %[[LANE:.*]] = arith.remui %[[TID:.*]], %c32{{(_[0-9]+)?}} : index
// CHECK-DAG: %[[WARP:.*]] = arith.divui %[[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK-NOT: workgroup(
// CHECK: scf.for %{{.*}} = %[[WARP]] to %c16{{(_[0-9]+)?}} step %c8{{(_[0-9]+)?}} {
// CHECK: %[[P:.*]]:2 = scf.for %{{.*}} = %[[LANE]] to %c512{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args(%{{.*}} = %cst{{(_[0-9]+)?}}, %{{.*}} = %cst{{(_[0-9]+)?}}) -> (f32, f32) {
// CHECK: math.exp
// CHECK: scf.yield
// CHECK: %[[M1:.*]], %{{.*}} = gpu.shuffle xor %[[P]]#0, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK-NEXT: %[[S1:.*]], %{{.*}} = gpu.shuffle xor %[[P]]#1, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK-NEXT: arith.maximumf %[[P]]#0, %[[M1]] : f32
// CHECK: math.exp
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %c0{{(_[0-9]+)?}}
// CHECK: scf.if %[[FIRST]] {
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[MOUT:[a-z_0-9]+]][
// CHECK-NEXT: memref.store %{{.*}}, %[[SOUT:[a-z_0-9]+]][
// CHECK-NOT: gpu.barrier
// CHECK-NOT: gpu.subgroup_reduce
// CHECK: gpu.terminator
func.func @online_softmax_warp_per_row(%x: memref<64x512xf32>, %m: memref<64xf32>, %s: memref<64xf32>) {
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 16)>(%wg)
    %a = memref.subview %x[%row, 0] [16, 512] [1, 1] : memref<64x512xf32> to memref<16x512xf32, strided<[512, 1], offset: ?>>
    %b = memref.subview %m[%row] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
    %c = memref.subview %s[%row] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<16x512xf32, strided<[512, 1], offset: ?>>)
        outs(%b, %c : memref<16xf32, strided<[1], offset: ?>>, memref<16xf32, strided<[1], offset: ?>>)
        attrs = {meg.online_softmax} {
    ^bb0(%in: f32, %max: f32, %sum: f32):
      %big = arith.maximumf %max, %in : f32
      %small = arith.minimumf %max, %in : f32
      %empty = arith.cmpf oeq, %big, %neg_inf : f32
      %diff = arith.subf %small, %big : f32
      %exp = math.exp %diff : f32
      %d = arith.select %empty, %zero, %exp : f32
      %sd = arith.mulf %sum, %d : f32
      %grows = arith.cmpf ogt, %in, %max : f32
      %up = arith.addf %sd, %one : f32
      %same = arith.addf %sum, %d : f32
      %new = arith.select %grows, %up, %same : f32
      linalg.yield %big, %new : f32, f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Online softmax statistics, one row per workgroup: a block per row. After
// the warps' shuffles, lane 0 of each warp writes its pair to shared memory
// (the launch's workgroup buffer of 8 maxima and 8 sums), a barrier, the
// first thread folds the 8 pairs in warp order and then into the outputs,
// and a second barrier keeps the next row from overwriting the pairs first.
// CHECK-LABEL: func.func @online_softmax_block_per_row
// CHECK: gpu.launch {{.*}} workgroup(%[[PAIRS:.*]] : memref<16xf32, #gpu.address_space<workgroup>>)
// CHECK-DAG: %[[LANE:.*]] = arith.remui %[[TID:[a-z_0-9]+]], %c32{{(_[0-9]+)?}} : index
// CHECK-DAG: %[[WARP:.*]] = arith.divui %[[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.*}} = %[[TID]] to %c8192{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} iter_args
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: %[[ONLANE:.*]] = arith.cmpi eq, %[[LANE]], %c0{{(_[0-9]+)?}}
// CHECK: scf.if %[[ONLANE]] {
// CHECK-NEXT: memref.store %{{.*}}, %[[PAIRS]][%[[WARP]]]
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[WARP]], %c8{{(_[0-9]+)?}}
// CHECK-NEXT: memref.store %{{.*}}, %[[PAIRS]][%[[AT]]]
// CHECK: gpu.barrier
// CHECK: %[[ONFIRST:.*]] = arith.cmpi eq, %[[TID]], %c0{{(_[0-9]+)?}}
// CHECK: scf.if %[[ONFIRST]] {
// CHECK: scf.for %[[W:.*]] = %c1{{(_[0-9]+)?}} to %c8{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args
// CHECK: memref.load %[[PAIRS]][%[[W]]]
// CHECK: math.exp
// CHECK: memref.store
// CHECK-NEXT: memref.store
// CHECK: gpu.barrier
// CHECK: gpu.terminator
func.func @online_softmax_block_per_row(%x: memref<2x8192xf32>, %m: memref<2xf32>, %s: memref<2xf32>) {
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.forall (%wg) in (2) {
    %a = memref.subview %x[%wg, 0] [1, 8192] [1, 1] : memref<2x8192xf32> to memref<1x8192xf32, strided<[8192, 1], offset: ?>>
    %b = memref.subview %m[%wg] [1] [1] : memref<2xf32> to memref<1xf32, strided<[1], offset: ?>>
    %c = memref.subview %s[%wg] [1] [1] : memref<2xf32> to memref<1xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<1x8192xf32, strided<[8192, 1], offset: ?>>)
        outs(%b, %c : memref<1xf32, strided<[1], offset: ?>>, memref<1xf32, strided<[1], offset: ?>>)
        attrs = {meg.online_softmax} {
    ^bb0(%in: f32, %max: f32, %sum: f32):
      %big = arith.maximumf %max, %in : f32
      %small = arith.minimumf %max, %in : f32
      %empty = arith.cmpf oeq, %big, %neg_inf : f32
      %diff = arith.subf %small, %big : f32
      %exp = math.exp %diff : f32
      %d = arith.select %empty, %zero, %exp : f32
      %sd = arith.mulf %sum, %d : f32
      %grows = arith.cmpf ogt, %in, %max : f32
      %up = arith.addf %sd, %one : f32
      %same = arith.addf %sum, %d : f32
      %new = arith.select %grows, %up, %same : f32
      linalg.yield %big, %new : f32, f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
#partial = affine_map<(d0, d1) -> (d0, d1)>
#swap = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0)>

// Column reduction: each workgroup sums its 16 rows into its row of the
// partials, a thread per column with the sum in a register; the combine
// over the 4 workgroups' partials is serial per column, in workgroup
// order (the partials are read down a column, not along a row). No
// shuffles: neighbouring threads read neighbouring columns.
// CHECK-LABEL: func.func @column_reduction
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c4{{(_[0-9]+)?}},
// CHECK: scf.for %[[C:.*]] = %[[TID:[a-z_0-9]+]] to %c512{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: %[[INIT:.*]] = memref.load %{{.*}}[%[[C]]]
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %c0{{(_[0-9]+)?}} to %c16{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args(%{{.*}} = %[[INIT]]) -> (f32) {
// CHECK: memref.store %[[SUM]], %{{.*}}[%[[C]]]
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{(_[0-9]+)?}},
// CHECK: scf.for %[[C2:.*]] = %{{.*}} to %c512{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: scf.for %[[W:.*]] = %c0{{(_[0-9]+)?}} to %c4{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args
// CHECK: memref.load %{{.*}}[%[[W]], %[[C2]]] : memref<4x512xf32>
// CHECK-NOT: gpu.all_reduce
// CHECK-NOT: gpu.subgroup_reduce
func.func @column_reduction(%x: memref<64x512xf32>, %partials: memref<4x512xf32>, %dw: memref<512xf32>) {
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 16)>(%wg)
    %a = memref.subview %x[%row, 0] [16, 512] [1, 1] : memref<64x512xf32> to memref<16x512xf32, strided<[512, 1], offset: ?>>
    %p = memref.subview %partials[%wg, 0] [1, 512] [1, 1] : memref<4x512xf32> to memref<512xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #cols], iterator_types = ["reduction", "parallel"]}
        ins(%a : memref<16x512xf32, strided<[512, 1], offset: ?>>)
        outs(%p : memref<512xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.addf %acc, %in : f32
      linalg.yield %t : f32
    }
  }
  scf.forall (%wg) in (1) {
    linalg.generic {indexing_maps = [#swap, #out], iterator_types = ["parallel", "reduction"]}
        ins(%partials : memref<4x512xf32>) outs(%dw : memref<512xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.addf %acc, %in : f32
      linalg.yield %t : f32
    }
  }
  return
}

// -----

#swap = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0)>

// The combine of 4 columns' partials over 64 workgroups: fewer outputs
// than threads, so the block shares each column (threads stride over the
// workgroups' partials) instead of one thread summing all 64.
// CHECK-LABEL: func.func @few_columns
// CHECK: scf.for %[[C:.*]] = %c0{{(_[0-9]+)?}} to %c4{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK: scf.for %[[W:.*]] = %[[TID:[a-z_0-9]+]] to %c64{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} iter_args
// CHECK: memref.load %{{.*}}[%[[W]], %[[C]]] : memref<64x4xf32>
// CHECK: gpu.all_reduce add
func.func @few_columns(%partials: memref<64x4xf32>, %dw: memref<4xf32>) {
  scf.forall (%wg) in (1) {
    linalg.generic {indexing_maps = [#swap, #out], iterator_types = ["parallel", "reduction"]}
        ins(%partials : memref<64x4xf32>) outs(%dw : memref<4xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.addf %acc, %in : f32
      linalg.yield %t : f32
    }
  }
  return
}

// -----

// A step that is not a loop nest (a serial scatter) runs on the block's
// first thread, after a barrier behind the fill before it.
// CHECK-LABEL: func.func @serial_step
// CHECK: scf.for %{{.*}} = %[[TID:[a-z_0-9]+]] to %c8{{(_[0-9]+)?}} step %c256{{(_[0-9]+)?}} {
// CHECK: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %c0{{(_[0-9]+)?}}
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: scf.for %{{.*}} = %c0{{(_[0-9]+)?}} to %c4{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} {
// CHECK: memref.store
func.func @serial_step(%ids: memref<4xindex>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.forall (%wg) in (1) {
    linalg.fill ins(%zero : f32) outs(%y : memref<8xf32>)
    scf.for %i = %c0 to %c4 step %c1 {
      %id = memref.load %ids[%i] : memref<4xindex>
      %v = memref.load %y[%id] : memref<8xf32>
      %w = arith.addf %v, %one : f32
      memref.store %w, %y[%id] : memref<8xf32>
    }
  }
  return
}

// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu | FileCheck %s
// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu=stage-bytes=0 | FileCheck %s --check-prefix=NONE
// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu=stage-bytes=4096 | FileCheck %s --check-prefix=SMALL
// RUN: not megc-opt %s -split-input-file --meg-map-kernels-to-gpu=stage-bytes=-1 2>&1 | FileCheck %s --check-prefix=BAD

// Tiles that several loop nests of a dispatch read and none writes are
// staged in shared memory: copied once, read there by every nest.

// BAD: meg-map-kernels-to-gpu: stage-bytes -1 is negative

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>

// A norm: the rows are reduced, then scaled. The tile of x (2 x 1024 bf16,
// two views of it) is a workgroup buffer, filled by the block's threads
// with 128-bit loads and stores where aligned (elements otherwise); after
// a barrier the reduction and the scaling read it there. The weight, read
// by one nest, and the sums, written, stay where they are.
// CHECK-LABEL: func.func @staged_norm
// CHECK: gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<2x1024xbf16, #gpu.address_space<workgroup>>) {
// CHECK: %[[X:.*]] = memref.subview %arg0
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: %[[V:.*]] = vector.load %[[X]][{{.*}}] {alignment = 16 : i64} : memref<2x1024xbf16, strided<[1024, 1], offset: ?>>, vector<8xbf16>
// CHECK: vector.store %[[V]], %[[TILE]][{{.*}}] {alignment = 16 : i64}
// CHECK: } else {
// CHECK: %[[E:.*]] = memref.load %[[X]]
// CHECK: memref.store %[[E]], %[[TILE]]
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: memref.load %[[TILE]]
// CHECK: gpu.all_reduce
// CHECK: gpu.barrier
// CHECK: vector.load %[[TILE]]
// CHECK: vector.load %arg1
// CHECK-NOT: memref.load %[[X]]
// CHECK-NOT: vector.load %[[X]]
// CHECK: gpu.terminator
// NONE-LABEL: func.func @staged_norm
// NONE-NOT: workgroup(
// NONE: gpu.terminator

func.func @staged_norm(%x: memref<8x1024xbf16>, %w: memref<1024xbf16>, %s: memref<8xf32>, %y: memref<8x1024xbf16>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 2)>(%wg)
    %sum = memref.subview %s[%row] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%sum : memref<2xf32, strided<[1], offset: ?>>)
    %a = memref.subview %x[%row, 0] [2, 1024] [1, 1] : memref<8x1024xbf16> to memref<2x1024xbf16, strided<[1024, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<2x1024xbf16, strided<[1024, 1], offset: ?>>)
        outs(%sum : memref<2xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: bf16, %acc: f32):
      %e = arith.extf %in : bf16 to f32
      %q = arith.mulf %e, %e : f32
      %t = arith.addf %acc, %q : f32
      linalg.yield %t : f32
    }
    %a2 = memref.subview %x[%row, 0] [2, 1024] [1, 1] : memref<8x1024xbf16> to memref<2x1024xbf16, strided<[1024, 1], offset: ?>>
    %o = memref.subview %y[%row, 0] [2, 1024] [1, 1] : memref<8x1024xbf16> to memref<2x1024xbf16, strided<[1024, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows, #cols, #id], iterator_types = ["parallel", "parallel"]}
        ins(%a2, %sum, %w : memref<2x1024xbf16, strided<[1024, 1], offset: ?>>, memref<2xf32, strided<[1], offset: ?>>, memref<1024xbf16>)
        outs(%o : memref<2x1024xbf16, strided<[1024, 1], offset: ?>>) {
    ^bb0(%in: bf16, %ss: f32, %g: bf16, %out: bf16):
      %e = arith.extf %in : bf16 to f32
      %r = math.rsqrt %ss : f32
      %n = arith.mulf %e, %r : f32
      %ge = arith.extf %g : bf16 to f32
      %m = arith.mulf %n, %ge : f32
      %t = arith.truncf %m : f32 to bf16
      linalg.yield %t : bf16
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// The rows are normalized in place: the tile is written in the dispatch,
// so no nest may read a copy of it.
// CHECK-LABEL: func.func @written_tile
// CHECK-NOT: workgroup(
// CHECK: gpu.terminator
func.func @written_tile(%x: memref<8x1024xf32>, %s: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 2)>(%wg)
    %sum = memref.subview %s[%row] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%sum : memref<2xf32, strided<[1], offset: ?>>)
    %a = memref.subview %x[%row, 0] [2, 1024] [1, 1] : memref<8x1024xf32> to memref<2x1024xf32, strided<[1024, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%a : memref<2x1024xf32, strided<[1024, 1], offset: ?>>)
        outs(%sum : memref<2xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %acc: f32):
      %t = arith.addf %acc, %in : f32
      linalg.yield %t : f32
    }
    linalg.generic {indexing_maps = [#rows, #id], iterator_types = ["parallel", "parallel"]}
        ins(%sum : memref<2xf32, strided<[1], offset: ?>>)
        outs(%a : memref<2x1024xf32, strided<[1024, 1], offset: ?>>) {
    ^bb0(%total: f32, %out: f32):
      %t = arith.divf %out, %total : f32
      linalg.yield %t : f32
    }
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Two tiles of 4 KiB: dy read by three nests, x by two. Both fit the
// default budget; in 4 KiB only dy's, which saves the more reads.
// CHECK-LABEL: func.func @two_tiles
// CHECK: workgroup(%{{.*}} : memref<2x512xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2x512xf32, #gpu.address_space<workgroup>>)
// SMALL-LABEL: func.func @two_tiles
// SMALL: workgroup(%[[DY:.*]] : memref<2x512xf32, #gpu.address_space<workgroup>>) {
// SMALL: %[[X:.*]] = memref.subview %arg0
// SMALL: %[[G:.*]] = memref.subview %arg1
// SMALL: vector.load %[[G]]
// SMALL: vector.store %{{.*}}, %[[DY]]
// SMALL: memref.load %[[X]]
// SMALL: memref.load %[[DY]]
// SMALL: gpu.terminator
func.func @two_tiles(%x: memref<8x512xf32>, %dy: memref<8x512xf32>, %a: memref<8xf32>, %b: memref<8xf32>, %dx: memref<8x512xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%wg) in (4) {
    %row = affine.apply affine_map<(d0) -> (d0 * 2)>(%wg)
    %x0 = memref.subview %x[%row, 0] [2, 512] [1, 1] : memref<8x512xf32> to memref<2x512xf32, strided<[512, 1], offset: ?>>
    %g0 = memref.subview %dy[%row, 0] [2, 512] [1, 1] : memref<8x512xf32> to memref<2x512xf32, strided<[512, 1], offset: ?>>
    %sa = memref.subview %a[%row] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: ?>>
    %sb = memref.subview %b[%row] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: ?>>
    %o = memref.subview %dx[%row, 0] [2, 512] [1, 1] : memref<8x512xf32> to memref<2x512xf32, strided<[512, 1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%sa : memref<2xf32, strided<[1], offset: ?>>)
    linalg.fill ins(%zero : f32) outs(%sb : memref<2xf32, strided<[1], offset: ?>>)
    // sum(x * dy)
    linalg.generic {indexing_maps = [#id, #id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%x0, %g0 : memref<2x512xf32, strided<[512, 1], offset: ?>>, memref<2x512xf32, strided<[512, 1], offset: ?>>)
        outs(%sa : memref<2xf32, strided<[1], offset: ?>>) {
    ^bb0(%u: f32, %v: f32, %acc: f32):
      %p = arith.mulf %u, %v : f32
      %t = arith.addf %acc, %p : f32
      linalg.yield %t : f32
    }
    // sum(dy)
    linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
        ins(%g0 : memref<2x512xf32, strided<[512, 1], offset: ?>>)
        outs(%sb : memref<2xf32, strided<[1], offset: ?>>) {
    ^bb0(%v: f32, %acc: f32):
      %t = arith.addf %acc, %v : f32
      linalg.yield %t : f32
    }
    // dx = dy - x * sum(x * dy) - sum(dy)
    linalg.generic {indexing_maps = [#id, #id, #rows, #rows, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x0, %g0, %sa, %sb : memref<2x512xf32, strided<[512, 1], offset: ?>>, memref<2x512xf32, strided<[512, 1], offset: ?>>, memref<2xf32, strided<[1], offset: ?>>, memref<2xf32, strided<[1], offset: ?>>)
        outs(%o : memref<2x512xf32, strided<[512, 1], offset: ?>>) {
    ^bb0(%u: f32, %v: f32, %p: f32, %q: f32, %out: f32):
      %m = arith.mulf %u, %p : f32
      %d = arith.subf %v, %m : f32
      %t = arith.subf %d, %q : f32
      linalg.yield %t : f32
    }
  }
  return
}

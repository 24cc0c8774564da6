// RUN: megc-opt %s --meg-map-kernels-to-gpu | FileCheck %s
// RUN: megc-opt %s --meg-map-kernels-to-gpu=threads-per-block=128 | FileCheck %s --check-prefix=SMALL

// Every loop nest becomes a launch of blocks of threads-per-block threads,
// the row reduction one thread per row with its reduction loop serial (the
// parallel dimension first); nothing stays on the host.
// CHECK-LABEL: func.func @k
// CHECK: %[[T:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in (%{{.*}} = %[[T]],
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in (%{{.*}} = %[[T]],
// CHECK: scf.for {{.*}} to %{{.*}}1024
// CHECK-NOT: linalg
// SMALL: arith.constant 128 : index

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
func.func @k(%x: memref<64x1024xf32>, %s: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x1024xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  return
}

// RUN: megc-opt %s -split-input-file --meg-select-kernel-strategy | FileCheck %s
// RUN: megc-opt %s -split-input-file --meg-set-target=vector-bits=512 --meg-select-kernel-strategy | FileCheck %s --check-prefix=AVX512
// RUN: megc-opt %s -split-input-file --meg-set-target="target=cuda cuda-arch=sm_90a" --meg-select-kernel-strategy | FileCheck %s --check-prefix=CUDA

// The target is the module's meg.target (meg-set-target records it; without
// one, the CPU with 128-bit vectors).

// One kernel of each strategy, on buffers (after meg-bufferize-kernels).

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>

// Every element independent: the rows split into 32 workgroups of 16 (at
// least 16K iterations each); CUDA takes a row per block.
// CHECK-LABEL: func.func @pointwise
// CHECK-SAME: meg.kernel_strategy = #meg.kernel_strategy<pointwise, domain = [512, 1024], tile = [16, 1024], vector = 4>
// AVX512-LABEL: func.func @pointwise
// AVX512-SAME: vector = 16>
// CUDA-LABEL: func.func @pointwise
// CUDA-SAME: #meg.kernel_strategy<pointwise, domain = [512, 1024], tile = [1, 1024], vector = 4>
func.func @pointwise(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<512x1024xf32>) outs(%y : memref<512x1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>

// Rows reduced, then normalised: both nests share the row domain, each
// workgroup reducing and writing its own rows.
// CHECK-LABEL: func.func @row_reduction
// CHECK-SAME: #meg.kernel_strategy<row_reduction, domain = [512], tile = [16], vector = 4>
// CUDA-LABEL: func.func @row_reduction
// CUDA-SAME: #meg.kernel_strategy<row_reduction, domain = [512], tile = [1], vector = 4>
func.func @row_reduction(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) {
  %zero = arith.constant 0.0 : f32
  %sums = memref.alloc() : memref<512xf32>
  linalg.fill ins(%zero : f32) outs(%sums : memref<512xf32>)
  linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x1024xf32>) outs(%sums : memref<512xf32>) {
  ^bb0(%a: f32, %s: f32):
    %t = arith.addf %s, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sums : memref<512x1024xf32>, memref<512xf32>) outs(%y : memref<512x1024xf32>) {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %q = arith.divf %a, %s : f32
    linalg.yield %q : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>

// A weight gradient summed over the rows next to an elementwise input
// gradient over the same rows: the rows split, the sum in partials.
// CHECK-LABEL: func.func @column_reduction
// CHECK-SAME: #meg.kernel_strategy<column_reduction, domain = [512, 1024], tile = [16, 1024], vector = 4>
func.func @column_reduction(%x: memref<512x1024xf32>, %dy: memref<512x1024xf32>, %dx: memref<512x1024xf32>, %dw: memref<1024xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %dy : memref<512x1024xf32>, memref<512x1024xf32>) outs(%dx : memref<512x1024xf32>) {
  ^bb0(%a: f32, %g: f32, %b: f32):
    %p = arith.mulf %a, %g : f32
    linalg.yield %p : f32
  }
  linalg.fill ins(%zero : f32) outs(%dw : memref<1024xf32>)
  linalg.generic {indexing_maps = [#id, #id, #cols], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : memref<512x1024xf32>, memref<512x1024xf32>) outs(%dw : memref<1024xf32>) {
  ^bb0(%a: f32, %g: f32, %s: f32):
    %p = arith.mulf %a, %g : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>

// Everything reduced to a scalar (a loss); its initialisation moves ahead.
// CHECK-LABEL: func.func @full_reduction
// CHECK-SAME: #meg.kernel_strategy<full_reduction, domain = [512, 1024], tile = [16, 1024], vector = 4>
func.func @full_reduction(%x: memref<512x1024xf32>, %loss: memref<f32>) {
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

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
#cols = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>

// Nothing to split.
// CHECK-LABEL: func.func @serial
// CHECK-SAME: #meg.kernel_strategy<serial, domain = [], tile = [], vector = 4>
func.func @serial(%x: memref<f32>, %y: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%x : memref<f32>) outs(%y : memref<f32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>

// Too small to split: every domain gives one workgroup, and the kernel is
// still described by its rows (a row reduction), not by a domain that
// includes the reduced dimension.
// CHECK-LABEL: func.func @small_row_reduction
// CHECK-SAME: #meg.kernel_strategy<row_reduction, domain = [16], tile = [16], vector = 4>
func.func @small_row_reduction(%x: memref<16x64xf32>, %y: memref<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %sums = memref.alloc() : memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%sums : memref<16xf32>)
  linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x64xf32>) outs(%sums : memref<16xf32>) {
  ^bb0(%a: f32, %s: f32):
    %t = arith.addf %s, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sums : memref<16x64xf32>, memref<16xf32>) outs(%y : memref<16x64xf32>) {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %q = arith.divf %a, %s : f32
    linalg.yield %q : f32
  }
  return
}

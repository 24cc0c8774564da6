// The online statistics compute what the two reductions they replace
// compute: both run on the CPU here (lowered with MLIR's own passes and
// executed by mlir-runner) over the same rows, the reference written so that
// meg-online-softmax does not match it (exp of the negated difference).
// Rows: ordinary logits, an ascending row (the maximum grows at every
// element, so the sum is rescaled 39 times), a row with -inf elements (the
// first among them), and a row spanning 88 to -88. The expected values are
// NumPy's, in float64, from the same f32 data (numpy.random.default_rng(3)
// for the random rows, every value written with %.9g):
//   x.max(1)                             = [9.96899891, 50, 3.18128037, 88]
//   np.exp(x - x.max(1)[:, None]).sum(1) = [1.04713309, 1.14753917, 4.87997521, 1]
// printed to six digits (the third sum, in f32, as 4.87997 by both).

// REQUIRES: mlir-runner
// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-online-softmax))' \
// RUN:   | FileCheck %s --check-prefix=REWRITE
// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-online-softmax))' \
// RUN:   | megc-opt --convert-linalg-to-loops --convert-scf-to-cf --convert-math-to-llvm \
// RUN:     --expand-strided-metadata --finalize-memref-to-llvm --convert-arith-to-llvm \
// RUN:     --convert-cf-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils \
// RUN:   | FileCheck %s

// One pair merged; the reference left as written.
// REWRITE-LABEL: func.func @main
// REWRITE: outs(%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) attrs = {meg.online_softmax}
// REWRITE-NOT: meg.online_softmax
// REWRITE: arith.negf

// CHECK: data =
// CHECK-NEXT: [9.969,  50,  3.18128,  88]
// CHECK: data =
// CHECK-NEXT: [1.04713,  1.14754,  4.87997,  1]
// CHECK: data =
// CHECK-NEXT: [9.969,  50,  3.18128,  88]
// CHECK: data =
// CHECK-NEXT: [1.04713,  1.14754,  4.87997,  1]

#row = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>

memref.global "private" constant @logits : memref<4x40xf32> = dense<[
    [6.12275743, -7.66699505, 1.25429654, -1.70330882, -1.35794783, -0.646791518, -6.05995846, -0.695797145, -2.59563923, 9.96899891, 0.677359819, -1.05789244, -0.843862236, -2.00413895, -3.16545177, -1.17240298, 1.44583619, -0.71566081, 2.873276, -0.599406362, 0.0727786943, 4.63746262, 1.63531661, -1.51568615, -0.548516929, 1.62157536, 5.805264, -0.808860958, -0.730676055, 3.00694084, -2.65937972, -0.875160694, 2.64761686, 1.74105, 0.27455011, 2.01031303, -8.48448658, 3.0639205, -2.87893438, -5.00585938],
    [-30.0, -27.9487171, -25.8974361, -23.8461533, -21.7948723, -19.7435894, -17.6923084, -15.6410255, -13.5897436, -11.5384617, -9.48717976, -7.43589735, -5.38461542, -3.33333325, -1.28205132, 0.769230783, 2.82051277, 4.8717947, 6.92307711, 8.97435856, 11.0256414, 13.0769234, 15.1282053, 17.1794872, 19.2307701, 21.2820511, 23.333334, 25.3846149, 27.4358978, 29.4871788, 31.5384617, 33.5897446, 35.6410255, 37.6923065, 39.7435913, 41.7948723, 43.8461533, 45.8974342, 47.948719, 50.0],
    [0xFF800000, 1.40108979, -0.889534891, -2.15281177, 0.0522496663, -0.105494618, 2.81119633, 0xFF800000, 0.387631297, 2.22326636, -0.411046088, -1.85179913, 1.16811657, 1.16507685, -0.429657817, -1.5656172, 0.458307803, -4.98778868, 1.3802495, 0.982736528, -3.27771425, 0.122707017, -1.92819929, 1.51444209, -4.06833458, -1.82898903, 1.41916001, 2.31280208, -4.31601095, -0.996079683, 0.656040192, -1.21843231, 3.18128037, -2.38245344, 0.709063888, -2.09681106, 2.81192589, -0.0433024578, -0.744501114, 0xFF800000],
    [1.68182552, 0.75277859, 0.753563821, 1.13788128, 0.349226564, 88.0, -88.0, -0.800199986, 1.37007236, -1.46038115, -0.596369505, -0.321243912, 0.224619031, 0.575349391, -1.24909699, -1.73001349, -0.00441423245, 1.2135638, 0.757058084, 0.215650782, -0.317155629, 0.293233693, -0.243335083, 0.817206562, -0.794447362, 0.134239942, -0.110780135, 0.543359399, 0.224638522, 2.55003452, 1.49865472, 1.49673712, -2.03950381, -0.340316623, -0.60861063, 0.532721579, -2.27902651, 1.17449868, 1.06698334, -1.30207086]]>

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %x = memref.get_global @logits : memref<4x40xf32>
  %m = memref.alloc() : memref<4xf32>
  %s = memref.alloc() : memref<4xf32>
  %m_ref = memref.alloc() : memref<4xf32>
  %s_ref = memref.alloc() : memref<4xf32>
  linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x40xf32>) outs(%m : memref<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.maximumf %out, %in : f32
      linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x40xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
    ^bb0(%in: f32, %in_m: f32, %out: f32):
      %d = arith.subf %in, %in_m : f32
      %e = math.exp %d : f32
      %r = arith.addf %out, %e : f32
      linalg.yield %r : f32
  }
  linalg.fill ins(%neg_inf : f32) outs(%m_ref : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x40xf32>) outs(%m_ref : memref<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.maximumf %out, %in : f32
      linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%s_ref : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m_ref : memref<4x40xf32>, memref<4xf32>) outs(%s_ref : memref<4xf32>) {
    ^bb0(%in: f32, %in_m: f32, %out: f32):
      %d = arith.subf %in_m, %in : f32
      %n = arith.negf %d : f32
      %e = math.exp %n : f32
      %r = arith.addf %out, %e : f32
      linalg.yield %r : f32
  }
  %0 = memref.cast %m : memref<4xf32> to memref<*xf32>
  %1 = memref.cast %s : memref<4xf32> to memref<*xf32>
  %2 = memref.cast %m_ref : memref<4xf32> to memref<*xf32>
  %3 = memref.cast %s_ref : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%0) : (memref<*xf32>) -> ()
  call @printMemrefF32(%1) : (memref<*xf32>) -> ()
  call @printMemrefF32(%2) : (memref<*xf32>) -> ()
  call @printMemrefF32(%3) : (memref<*xf32>) -> ()
  memref.dealloc %m : memref<4xf32>
  memref.dealloc %s : memref<4xf32>
  memref.dealloc %m_ref : memref<4xf32>
  memref.dealloc %s_ref : memref<4xf32>
  return
}

// RUN: megc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(meg-online-softmax))' | FileCheck %s

#row = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>

// A cross-entropy's statistics over bf16 logits (read as f32): the maximum
// and the sum of exponentials become one nest, its outputs the maximum and
// the sum, after both fills; the element is extended once and folded in
// with one exponential, the sum rescaled when the maximum grows.
// CHECK-LABEL: func.func @bf16_rows
// CHECK-SAME: (%[[X:.*]]: memref<2x8x64xbf16>, %[[M:.*]]: memref<2x8xf32>, %[[S:.*]]: memref<2x8xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[M]] : memref<2x8xf32>)
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : memref<2x8xf32>)
// CHECK-NEXT: linalg.generic {indexing_maps = [#[[ROW:.*]], #[[OUT:.*]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : memref<2x8x64xbf16>) outs(%[[M]], %[[S]] : memref<2x8xf32>, memref<2x8xf32>) attrs = {meg.online_softmax} {
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %[[MAX:.*]]: f32, %[[SUM:.*]]: f32):
// CHECK-NEXT: %[[E:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: %[[BIG:.*]] = arith.maximumf %[[MAX]], %[[E]] : f32
// CHECK-NEXT: %[[SMALL:.*]] = arith.minimumf %[[MAX]], %[[E]] : f32
// CHECK: %[[EMPTY:.*]] = arith.cmpf oeq, %[[BIG]], %{{.*}} : f32
// CHECK-NEXT: %[[DIFF:.*]] = arith.subf %[[SMALL]], %[[BIG]] : f32
// CHECK-NEXT: %[[EXP:.*]] = math.exp %[[DIFF]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[EXP]] : f32
// CHECK: %[[SD:.*]] = arith.mulf %[[SUM]], %[[D]] : f32
// CHECK-NEXT: %[[GROWS:.*]] = arith.cmpf ogt, %[[E]], %[[MAX]] : f32
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[SD]], %{{.*}} : f32
// CHECK-NEXT: %[[B:.*]] = arith.addf %[[SUM]], %[[D]] : f32
// CHECK-NEXT: %[[NEW:.*]] = arith.select %[[GROWS]], %[[A]], %[[B]] : f32
// CHECK-NEXT: linalg.yield %[[BIG]], %[[NEW]] : f32, f32
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @bf16_rows(%x: memref<2x8x64xbf16>, %m: memref<2x8xf32>, %s: memref<2x8xf32>) {
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%neg_inf : f32) outs(%m : memref<2x8xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x8x64xbf16>) outs(%m : memref<2x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %e = arith.extf %in : bf16 to f32
    %r = arith.maximumf %out, %e : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<2x8xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %m : memref<2x8x64xbf16>, memref<2x8xf32>) outs(%s : memref<2x8xf32>) {
  ^bb0(%in: bf16, %in_m: f32, %out: f32):
    %e = arith.extf %in : bf16 to f32
    %d = arith.subf %e, %in_m : f32
    %x_exp = math.exp %d : f32
    %r = arith.addf %x_exp, %out : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#row = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>

// Left alone: the sum starts from 1, not 0 (its first term would be
// rescaled with the others); the sum reads another input than the maximum;
// something writes the input between the two; the sum's body does more
// than add exp(x - m).
// CHECK-LABEL: func.func @not_statistics
// CHECK-NOT: meg.online_softmax
// CHECK: return
func.func @not_statistics(%x: memref<4x64xf32>, %y: memref<4x64xf32>, %m: memref<4xf32>, %s: memref<4xf32>) {
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%one : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x64xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%in: f32, %in_m: f32, %out: f32):
    %d = arith.subf %in, %in_m : f32
    %e = math.exp %d : f32
    %r = arith.addf %out, %e : f32
    linalg.yield %r : f32
  }

  linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%y, %m : memref<4x64xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%in: f32, %in_m: f32, %out: f32):
    %d = arith.subf %in, %in_m : f32
    %e = math.exp %d : f32
    %r = arith.addf %out, %e : f32
    linalg.yield %r : f32
  }

  linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%x : memref<4x64xf32>)
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x64xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%in: f32, %in_m: f32, %out: f32):
    %d = arith.subf %in, %in_m : f32
    %e = math.exp %d : f32
    %r = arith.addf %out, %e : f32
    linalg.yield %r : f32
  }

  linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#row, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x64xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%in: f32, %in_m: f32, %out: f32):
    %d = arith.subf %in, %in_m : f32
    %e = math.exp %d : f32
    %h = arith.mulf %e, %e : f32
    %r = arith.addf %out, %h : f32
    linalg.yield %r : f32
  }
  return
}

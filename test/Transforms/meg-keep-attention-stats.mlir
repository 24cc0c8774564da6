// RUN: megc-opt %s --split-input-file --meg-keep-attention-stats | FileCheck %s

// The gradient of a forward attention gets the forward's statistics: the
// forward is rebuilt with `stats` (keeping its discardable attributes) and
// its output's users read the new op.
// CHECK-LABEL: func.func @kept
// CHECK: %[[O:.*]], %[[S:.*]] = meg.attention %arg0, %arg1, %arg2 causal scale 1.250000e-01 stats {meg.layer = 3 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
// CHECK-NEXT: meg.mul %[[O]], %[[O]]
// CHECK-NEXT: meg.attention_grad %arg3, %arg0, %arg1, %arg2, %[[O]] stats %[[S]] causal scale 1.250000e-01 : {{.*}}, tensor<2x4x8xf32>
// CHECK-NOT: meg.attention
func.func @kept(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>,
                %v: tensor<2x8x2x16xf32>, %do: tensor<2x8x4x16xf32>)
    -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>,
        tensor<2x8x2x16xf32>) {
  %o = meg.attention %q, %k, %v causal scale 0.125 {meg.layer = 3 : i64}
      : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
  %y = meg.mul %o, %o : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  %dq, %dk, %dv = meg.attention_grad %do, %q, %k, %v, %o causal scale 0.125
      : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>,
        tensor<2x8x2x16xf32>
  return %y, %dq, %dk, %dv : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
      tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
}

// -----

// A recomputed forward (meg-remat's copy, which the gradient reads) hands
// over its own statistics; the original, which feeds the rest of the
// forward, is left alone.
// CHECK-LABEL: func.func @recomputed
// CHECK: %[[O:.*]] = meg.attention %arg0, %arg1, %arg2 scale 2.500000e-01 : 
// CHECK: %[[R:.*]], %[[S:.*]] = meg.attention %arg0, %arg1, %arg2 scale 2.500000e-01 stats {meg.recomputed}
// CHECK-NEXT: meg.attention_grad %arg3, %arg0, %arg1, %arg2, %[[R]] stats %[[S]] scale
func.func @recomputed(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>,
                      %v: tensor<1x4x2x8xf32>, %do: tensor<1x4x2x8xf32>)
    -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o = meg.attention %q, %k, %v scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  %r = meg.attention %q, %k, %v scale 0.25 {meg.recomputed}
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  %dq, %dk, %dv = meg.attention_grad %do, %q, %k, %v, %r scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  return %o, %dq : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

// -----

// A forward that already returns its statistics is not rebuilt, and two
// gradients of one forward share them.
// CHECK-LABEL: func.func @shared
// CHECK: %[[O:.*]], %[[S:.*]] = meg.attention {{.*}} stats
// CHECK-NEXT: meg.attention_grad {{.*}}, %[[O]] stats %[[S]] scale
// CHECK-NEXT: meg.attention_grad {{.*}}, %[[O]] stats %[[S]] scale
func.func @shared(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>,
                  %do: tensor<1x4x2x8xf32>)
    -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o, %lse = meg.attention %q, %k, %k scale 0.25 stats
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  %a:3 = meg.attention_grad %do, %q, %k, %k, %o scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  %b:3 = meg.attention_grad %o, %q, %k, %k, %o scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  return %a#0, %b#0 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

// -----

// Gradients whose output is not the result of the same attention are left
// to recompute the statistics: an output passed in, a forward of another
// scale, mask or operands.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT: stats
func.func @unchanged(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>,
                     %o: tensor<1x4x2x8xf32>, %do: tensor<1x4x2x8xf32>)
    -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>) {
  %a:3 = meg.attention_grad %do, %q, %k, %k, %o scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  %f = meg.attention %q, %k, %k scale 0.5
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  %b:3 = meg.attention_grad %do, %q, %k, %k, %f scale 0.25
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  %c:3 = meg.attention_grad %do, %q, %k, %k, %f causal scale 0.5
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  %d:3 = meg.attention_grad %do, %k, %q, %k, %f scale 0.5
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
        tensor<1x4x2x8xf32>
  return %a#0, %b#0, %c#0, %d#0 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
      tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

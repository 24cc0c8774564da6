// RUN: megc-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(func.func(meg-fuse-rope{remarks=true},canonicalize))' \
// RUN:   | FileCheck %s

// Half-split, full rotary dim, bshd tables passed in as arguments.
// CHECK-LABEL: func.func @half_split
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x16xf32>, %[[COS:.*]]: tensor<1x8x1x16xf32>, %[[SIN:.*]]: tensor<1x8x1x16xf32>)
// CHECK-DAG: %[[C:.*]] = meg.reshape %[[COS]] : tensor<1x8x1x16xf32> to tensor<8x16xf32>
// CHECK-DAG: %[[S:.*]] = meg.reshape %[[SIN]] : tensor<1x8x1x16xf32> to tensor<8x16xf32>
// CHECK: %[[Y:.*]] = meg.rope %[[X]], %[[C]], %[[S]] layout bshd : tensor<2x8x4x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @half_split(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x8x1x16xf32>,
                      %sin: tensor<1x8x1x16xf32>) -> tensor<2x8x4x16xf32> {
  %x1 = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %x2 = meg.slice %x [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %n = meg.neg %x2 : tensor<2x8x4x8xf32>
  %r = meg.concat %n, %x1 axis 3 : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  %a = meg.mul %x, %cos : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  %b = meg.mul %r, %sin : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  %y = meg.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// Interleaved, partial rotary dim (8 of 16) with the tail re-joined, tables
// computed in the graph in f32 and rounded to bf16 before the multiplies:
// the fused op reads the f32 tables. The operands of add and mul come in
// the other order, the negation is a multiply by -1.
// CHECK-LABEL: func.func @interleaved_partial_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x16xbf16>, %[[EMB:.*]]: tensor<8x8xf32>)
// CHECK-DAG: %[[C:.*]] = meg.cos %[[EMB]] : tensor<8x8xf32>
// CHECK-DAG: %[[S:.*]] = meg.sin %[[EMB]] : tensor<8x8xf32>
// CHECK: %[[Y:.*]] = meg.rope %[[X]], %[[C]], %[[S]] layout bshd interleaved : tensor<2x8x4x16xbf16>, tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @interleaved_partial_bf16(%x: tensor<2x8x4x16xbf16>,
                                    %emb: tensor<8x8xf32>) -> tensor<2x8x4x16xbf16> {
  %c = meg.cos %emb : tensor<8x8xf32>
  %s = meg.sin %emb : tensor<8x8xf32>
  %cb = meg.cast %c : tensor<8x8xf32> to tensor<8x8xbf16>
  %sb = meg.cast %s : tensor<8x8xf32> to tensor<8x8xbf16>
  %cos = meg.reshape %cb : tensor<8x8xbf16> to tensor<1x8x1x8xbf16>
  %sin = meg.reshape %sb : tensor<8x8xbf16> to tensor<1x8x1x8xbf16>
  %rot = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xbf16>
  %x1 = meg.slice %rot [0, 0, 0, 0] [2, 8, 4, 4] [1, 1, 1, 2] : tensor<2x8x4x8xbf16>
  %x2 = meg.slice %rot [0, 0, 0, 1] [2, 8, 4, 4] [1, 1, 1, 2] : tensor<2x8x4x8xbf16>
  %m1 = arith.constant dense<-1.0> : tensor<bf16>
  %n = meg.mul %m1, %x2 : tensor<bf16>, tensor<2x8x4x4xbf16>
  %p0 = meg.reshape %n : tensor<2x8x4x4xbf16> to tensor<2x8x4x4x1xbf16>
  %p1 = meg.reshape %x1 : tensor<2x8x4x4xbf16> to tensor<2x8x4x4x1xbf16>
  %st = meg.concat %p0, %p1 axis 4 : tensor<2x8x4x4x1xbf16>, tensor<2x8x4x4x1xbf16>
  %r = meg.reshape %st : tensor<2x8x4x4x2xbf16> to tensor<2x8x4x8xbf16>
  %a = meg.mul %cos, %rot : tensor<1x8x1x8xbf16>, tensor<2x8x4x8xbf16>
  %b = meg.mul %sin, %r : tensor<1x8x1x8xbf16>, tensor<2x8x4x8xbf16>
  %sum = meg.add %b, %a : tensor<2x8x4x8xbf16>, tensor<2x8x4x8xbf16>
  %tail = meg.slice %x [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xbf16>
  %y = meg.concat %sum, %tail axis 3 : tensor<2x8x4x8xbf16>, tensor<2x8x4x8xbf16>
  return %y : tensor<2x8x4x16xbf16>
}

// -----

// sbhd layout, a table longer than the sequence (sliced to 8 rows of 18),
// negation as a subtraction from zero; q and k share the tables.
// CHECK-LABEL: func.func @sbhd_long_table
// CHECK-SAME: (%[[Q:.*]]: tensor<8x2x4x16xf32>, %[[K:.*]]: tensor<8x2x2x16xf32>, %[[CT:.*]]: tensor<18x16xf32>, %[[ST:.*]]: tensor<18x16xf32>)
// CHECK: meg.rope %[[Q]], %[[CT]], %[[ST]] layout sbhd : tensor<8x2x4x16xf32>, tensor<18x16xf32>, tensor<18x16xf32>
// CHECK: meg.rope %[[K]], %[[CT]], %[[ST]] layout sbhd : tensor<8x2x2x16xf32>, tensor<18x16xf32>, tensor<18x16xf32>
func.func @sbhd_long_table(%q: tensor<8x2x4x16xf32>, %k: tensor<8x2x2x16xf32>,
                           %ct: tensor<18x16xf32>, %st: tensor<18x16xf32>)
    -> (tensor<8x2x4x16xf32>, tensor<8x2x2x16xf32>) {
  %c8 = meg.slice %ct [0, 0] [8, 16] [1, 1] : tensor<18x16xf32>
  %s8 = meg.slice %st [0, 0] [8, 16] [1, 1] : tensor<18x16xf32>
  %cos = meg.reshape %c8 : tensor<8x16xf32> to tensor<8x1x1x16xf32>
  %sin = meg.reshape %s8 : tensor<8x16xf32> to tensor<8x1x1x16xf32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %q1 = meg.slice %q [0, 0, 0, 0] [8, 2, 4, 8] [1, 1, 1, 1] : tensor<8x2x4x16xf32>
  %q2 = meg.slice %q [0, 0, 0, 8] [8, 2, 4, 8] [1, 1, 1, 1] : tensor<8x2x4x16xf32>
  %qn = meg.sub %zero, %q2 : tensor<f32>, tensor<8x2x4x8xf32>
  %qr = meg.concat %qn, %q1 axis 3 : tensor<8x2x4x8xf32>, tensor<8x2x4x8xf32>
  %qa = meg.mul %q, %cos : tensor<8x2x4x16xf32>, tensor<8x1x1x16xf32>
  %qb = meg.mul %qr, %sin : tensor<8x2x4x16xf32>, tensor<8x1x1x16xf32>
  %qy = meg.add %qa, %qb : tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>
  %k1 = meg.slice %k [0, 0, 0, 0] [8, 2, 2, 8] [1, 1, 1, 1] : tensor<8x2x2x16xf32>
  %k2 = meg.slice %k [0, 0, 0, 8] [8, 2, 2, 8] [1, 1, 1, 1] : tensor<8x2x2x16xf32>
  %kn = meg.neg %k2 : tensor<8x2x2x8xf32>
  %kr = meg.concat %kn, %k1 axis 3 : tensor<8x2x2x8xf32>, tensor<8x2x2x8xf32>
  %ka = meg.mul %cos, %k : tensor<8x1x1x16xf32>, tensor<8x2x2x16xf32>
  %kb = meg.mul %kr, %sin : tensor<8x2x2x16xf32>, tensor<8x1x1x16xf32>
  %ky = meg.add %kb, %ka : tensor<8x2x2x16xf32>, tensor<8x2x2x16xf32>
  return %qy, %ky : tensor<8x2x4x16xf32>, tensor<8x2x2x16xf32>
}

// -----

// The inverse rotation (concat(x2, -x1)) is left alone.
// CHECK-LABEL: func.func @inverse
// CHECK-NOT: meg.rope
func.func @inverse(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x8x1x16xf32>,
                   %sin: tensor<1x8x1x16xf32>) -> tensor<2x8x4x16xf32> {
  %x1 = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %x2 = meg.slice %x [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %n = meg.neg %x1 : tensor<2x8x4x8xf32>
  %r = meg.concat %x2, %n axis 3 : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  %a = meg.mul %x, %cos : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  %b = meg.mul %r, %sin : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  // expected-remark @+1 {{RoPE not fused: inverse rotation concat(x2, -x1) has no fused form}}
  %y = meg.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// Tables broadcast over the heads axis instead of the sequence: neither
// layout, left alone.
// CHECK-LABEL: func.func @unsupported_table
// CHECK-NOT: meg.rope
func.func @unsupported_table(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x1x4x16xf32>,
                             %sin: tensor<1x1x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %x1 = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %x2 = meg.slice %x [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %n = meg.neg %x2 : tensor<2x8x4x8xf32>
  %r = meg.concat %n, %x1 axis 3 : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  %a = meg.mul %x, %cos : tensor<2x8x4x16xf32>, tensor<1x1x4x16xf32>
  %b = meg.mul %r, %sin : tensor<2x8x4x16xf32>, tensor<1x1x4x16xf32>
  // expected-remark @+1 {{RoPE not fused: cos/sin are not broadcast as [1, S, 1, R] (bshd) or [S, 1, 1, R] (sbhd)}}
  %y = meg.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// A partial rotation whose result is used without the tail: no fused form.
// CHECK-LABEL: func.func @no_tail
// CHECK-NOT: meg.rope
func.func @no_tail(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x8x1x8xf32>,
                   %sin: tensor<1x8x1x8xf32>) -> tensor<2x8x4x8xf32> {
  %rot = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : tensor<2x8x4x16xf32>
  %x1 = meg.slice %rot [0, 0, 0, 0] [2, 8, 4, 4] [1, 1, 1, 1] : tensor<2x8x4x8xf32>
  %x2 = meg.slice %rot [0, 0, 0, 4] [2, 8, 4, 4] [1, 1, 1, 1] : tensor<2x8x4x8xf32>
  %n = meg.neg %x2 : tensor<2x8x4x4xf32>
  %r = meg.concat %n, %x1 axis 3 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>
  %a = meg.mul %rot, %cos : tensor<2x8x4x8xf32>, tensor<1x8x1x8xf32>
  %b = meg.mul %r, %sin : tensor<2x8x4x8xf32>, tensor<1x8x1x8xf32>
  // expected-remark @+1 {{RoPE not fused: the rotated channels are not re-joined with the pass-through tail}}
  %y = meg.add %a, %b : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return %y : tensor<2x8x4x8xf32>
}

// -----

// Not RoPE: the "rotated" operand is the input itself. No remark.
// CHECK-LABEL: func.func @not_rope
// CHECK-NOT: meg.rope
func.func @not_rope(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x8x1x16xf32>,
                    %sin: tensor<1x8x1x16xf32>) -> tensor<2x8x4x16xf32> {
  %a = meg.mul %x, %cos : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  %b = meg.mul %x, %sin : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
  %y = meg.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

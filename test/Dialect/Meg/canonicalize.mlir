// Folds and canonicalization patterns of the meg tensor ops.
// RUN: megc-opt %s -canonicalize -split-input-file | FileCheck %s

// -0.0 is the float identity of addition (x + -0.0 == x even for x = -0.0).
// CHECK-LABEL: func.func @add_zero
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NOT: meg.add
// CHECK: return %[[X]], %[[X]] : tensor<2x4xf32>, tensor<2x4xf32>
func.func @add_zero(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %zero = arith.constant dense<-0.0> : tensor<2x4xf32>
  %0 = meg.add %x, %zero : tensor<2x4xf32>, tensor<2x4xf32>
  %1 = meg.add %zero, %x : tensor<2x4xf32>, tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// The zero may be broadcast to x: the result still has x's type.
// CHECK-LABEL: func.func @add_zero_broadcast_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xbf16>)
// CHECK-NOT: meg.add
// CHECK: return %[[X]] : tensor<2x4xbf16>
func.func @add_zero_broadcast_rhs(%x: tensor<2x4xbf16>) -> tensor<2x4xbf16> {
  %zero = arith.constant dense<-0.0> : tensor<4xbf16>
  %0 = meg.add %x, %zero : tensor<2x4xbf16>, tensor<4xbf16>
  return %0 : tensor<2x4xbf16>
}

// -----

// x + 0 where x itself is broadcast changes the type: no fold (the
// constant only moves to the right, as add is commutative).
// CHECK-LABEL: func.func @add_zero_broadcasts_x
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHECK: %[[SUM:.*]] = meg.add %[[X]], %[[ZERO]] : tensor<4xf32>, tensor<2x4xf32>
// CHECK: %[[SUM2:.*]] = meg.add %[[X]], %[[ZERO]] : tensor<4xf32>, tensor<2x4xf32>
// CHECK: return %[[SUM]], %[[SUM2]]
func.func @add_zero_broadcasts_x(%x: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %zero = arith.constant dense<0.0> : tensor<2x4xf32>
  %0 = meg.add %x, %zero : tensor<4xf32>, tensor<2x4xf32>
  %1 = meg.add %zero, %x : tensor<2x4xf32>, tensor<4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// x + +0.0 is not x when x is -0.0 (the sum is +0.0): no fold for floats;
// integer zero has no sign and folds.
// CHECK-LABEL: func.func @add_positive_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi32>)
// CHECK: %[[SUM:.*]] = meg.add %[[X]]
// CHECK: return %[[SUM]], %[[I]]
func.func @add_positive_zero(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %zero = arith.constant dense<0.0> : tensor<4xf32>
  %izero = arith.constant dense<0> : tensor<4xi32>
  %0 = meg.add %x, %zero : tensor<4xf32>, tensor<4xf32>
  %1 = meg.add %i, %izero : tensor<4xi32>, tensor<4xi32>
  return %0, %1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// A constant that is not all zeros does not fold.
// CHECK-LABEL: func.func @add_nonzero
// CHECK: meg.add
// CHECK: meg.add
func.func @add_nonzero(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c = arith.constant dense<1.0> : tensor<2xf32>
  %d = arith.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = meg.add %x, %c : tensor<2xf32>, tensor<2xf32>
  %1 = meg.add %x, %d : tensor<2xf32>, tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @add_zero_int
// CHECK-SAME: (%[[X:.*]]: tensor<3xi32>)
// CHECK-NOT: meg.add
// CHECK: return %[[X]]
func.func @add_zero_int(%x: tensor<3xi32>) -> tensor<3xi32> {
  %zero = arith.constant dense<0> : tensor<3xi32>
  %0 = meg.add %zero, %x : tensor<3xi32>, tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// x - 0 folds; 0 - x does not.
// CHECK-LABEL: func.func @sub_zero
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf16>)
// CHECK: %[[ZERO:.*]] = arith.constant
// CHECK-NEXT: %[[NEG:.*]] = meg.sub %[[ZERO]], %[[X]]
// CHECK-NEXT: return %[[X]], %[[NEG]]
func.func @sub_zero(%x: tensor<2x4xf16>) -> (tensor<2x4xf16>, tensor<2x4xf16>) {
  %zero = arith.constant dense<0.0> : tensor<2x4xf16>
  %0 = meg.sub %x, %zero : tensor<2x4xf16>, tensor<2x4xf16>
  %1 = meg.sub %zero, %x : tensor<2x4xf16>, tensor<2x4xf16>
  return %0, %1 : tensor<2x4xf16>, tensor<2x4xf16>
}

// -----

// CHECK-LABEL: func.func @mul_one
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NOT: meg.mul
// CHECK: return %[[X]], %[[X]]
func.func @mul_one(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %one = arith.constant dense<1.0> : tensor<2x4xf32>
  %0 = meg.mul %x, %one : tensor<2x4xf32>, tensor<2x4xf32>
  %1 = meg.mul %one, %x : tensor<2x4xf32>, tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Multiplying by one that broadcasts x does not fold; neither does
// multiplying by zero.
// CHECK-LABEL: func.func @mul_no_fold
// CHECK: meg.mul
// CHECK: meg.mul
func.func @mul_no_fold(%x: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>) {
  %one = arith.constant dense<1.0> : tensor<3x4xf32>
  %zero = arith.constant dense<0.0> : tensor<4xf32>
  %0 = meg.mul %one, %x : tensor<3x4xf32>, tensor<4xf32>
  %1 = meg.mul %x, %zero : tensor<4xf32>, tensor<4xf32>
  return %0, %1 : tensor<3x4xf32>, tensor<4xf32>
}

// -----

// x / 1 folds; 1 / x does not.
// CHECK-LABEL: func.func @div_one
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xbf16>)
// CHECK: %[[ONE:.*]] = arith.constant
// CHECK-NEXT: %[[RECIP:.*]] = meg.div %[[ONE]], %[[X]]
// CHECK-NEXT: return %[[X]], %[[RECIP]]
func.func @div_one(%x: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>) {
  %one = arith.constant dense<1.0> : tensor<1x4xbf16>
  %0 = meg.div %x, %one : tensor<2x4xbf16>, tensor<1x4xbf16>
  %1 = meg.div %one, %x : tensor<1x4xbf16>, tensor<2x4xbf16>
  return %0, %1 : tensor<2x4xbf16>, tensor<2x4xbf16>
}

// -----

// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[N:.*]] = meg.neg %[[X]]
// CHECK-NEXT: return %[[X]], %[[N]]
func.func @neg_neg(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = meg.neg %x : tensor<4xf32>
  %1 = meg.neg %0 : tensor<4xf32>
  %2 = meg.neg %1 : tensor<4xf32>
  %3 = meg.neg %2 : tensor<4xf32>
  return %3, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>)
// CHECK-NOT: meg.cast
// CHECK: return %[[X]]
func.func @cast_same_type(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = meg.cast %x : tensor<4xbf16> to tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// bf16 -> f32 is exact, so the intermediate f32 can be skipped.
// CHECK-LABEL: func.func @cast_exact_widening_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>)
// CHECK-NEXT: %[[C:.*]] = meg.cast %[[X]] : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: return %[[C]]
func.func @cast_exact_widening_chain(%x: tensor<4xbf16>) -> tensor<4xf16> {
  %0 = meg.cast %x : tensor<4xbf16> to tensor<4xf32>
  %1 = meg.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// The folded chain keeps the outer cast's records.
// CHECK-LABEL: func.func @cast_chain_keeps_records
// CHECK: meg.cast {{.*}}{meg.layer = 2 : i64}
func.func @cast_chain_keeps_records(%x: tensor<4xbf16>) -> tensor<4xf16> {
  %0 = meg.cast %x {meg.layer = 2 : i64} : tensor<4xbf16> to tensor<4xf32>
  %1 = meg.cast %0 {meg.layer = 2 : i64} : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// A round trip through an exact widening is the input.
// CHECK-LABEL: func.func @cast_exact_widening_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>, %[[Y:.*]]: tensor<2x2xf16>)
// CHECK-NOT: meg.cast
// CHECK: return %[[X]], %[[Y]]
func.func @cast_exact_widening_round_trip(%x: tensor<4xbf16>, %y: tensor<2x2xf16>)
    -> (tensor<4xbf16>, tensor<2x2xf16>) {
  %0 = meg.cast %x : tensor<4xbf16> to tensor<4xf32>
  %1 = meg.cast %0 : tensor<4xf32> to tensor<4xbf16>
  %2 = meg.cast %y : tensor<2x2xf16> to tensor<2x2xf32>
  %3 = meg.cast %2 : tensor<2x2xf32> to tensor<2x2xf16>
  return %1, %3 : tensor<4xbf16>, tensor<2x2xf16>
}

// -----

// f32 -> bf16 rounds: the round trip must stay.
// CHECK-LABEL: func.func @cast_lossy_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[A:.*]] = meg.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[B:.*]] = meg.cast %[[A]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: return %[[B]]
func.func @cast_lossy_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = meg.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = meg.cast %0 : tensor<4xbf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 -> bf16 and integer -> float casts are not exact either.
// CHECK-LABEL: func.func @cast_inexact_chains
// CHECK-SAME: (%[[X:.*]]: tensor<4xf16>, %[[I:.*]]: tensor<4xi64>)
// CHECK-NEXT: %[[A:.*]] = meg.cast %[[X]] : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: %[[B:.*]] = meg.cast %[[A]] : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: %[[C:.*]] = meg.cast %[[I]] : tensor<4xi64> to tensor<4xf32>
// CHECK-NEXT: %[[D:.*]] = meg.cast %[[C]] : tensor<4xf32> to tensor<4xi64>
// CHECK-NEXT: return %[[B]], %[[D]]
func.func @cast_inexact_chains(%x: tensor<4xf16>, %i: tensor<4xi64>)
    -> (tensor<4xf16>, tensor<4xi64>) {
  %0 = meg.cast %x : tensor<4xf16> to tensor<4xbf16>
  %1 = meg.cast %0 : tensor<4xbf16> to tensor<4xf16>
  %2 = meg.cast %i : tensor<4xi64> to tensor<4xf32>
  %3 = meg.cast %2 : tensor<4xf32> to tensor<4xi64>
  return %1, %3 : tensor<4xf16>, tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NOT: meg.reshape
// CHECK: return %[[X]]
func.func @reshape_same_type(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = meg.reshape %x : tensor<2x4xf32> to tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = meg.reshape %[[X]] : tensor<2x4x8xf32> to tensor<64xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_reshape(%x: tensor<2x4x8xf32>) -> tensor<64xf32> {
  %0 = meg.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %1 = meg.reshape %0 : tensor<8x8xf32> to tensor<4x16xf32>
  %2 = meg.reshape %1 : tensor<4x16xf32> to tensor<64xf32>
  return %2 : tensor<64xf32>
}

// -----

// Reshaping back to the input's shape leaves the input.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>)
// CHECK-NOT: meg.reshape
// CHECK: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %0 = meg.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %1 = meg.reshape %0 : tensor<8x8xf32> to tensor<2x4x8xf32>
  return %1 : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NOT: meg.transpose
// CHECK: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = meg.transpose %x [0, 1, 2] : tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// transpose [1, 2, 0] of transpose [1, 0, 2] is transpose [0, 2, 1]:
// result dim i is input dim inner[outer[i]].
// CHECK-LABEL: func.func @transpose_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = meg.transpose %[[X]] [0, 2, 1] : tensor<2x3x4xf32>
// CHECK-NEXT: return %[[T]] : tensor<2x4x3xf32>
func.func @transpose_transpose(%x: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
  %0 = meg.transpose %x [1, 0, 2] : tensor<2x3x4xf32>
  %1 = meg.transpose %0 [1, 2, 0] : tensor<3x2x4xf32>
  return %1 : tensor<2x4x3xf32>
}

// -----

// A non-symmetric composition: [2, 0, 1] after [1, 2, 0] is the identity,
// while [1, 2, 0] after [1, 2, 0] is [2, 0, 1].
// CHECK-LABEL: func.func @transpose_transpose_cycles
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = meg.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32>
// CHECK-NEXT: return %[[X]], %[[T]] : tensor<2x3x4xf32>, tensor<4x2x3xf32>
func.func @transpose_transpose_cycles(%x: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = meg.transpose %x [1, 2, 0] : tensor<2x3x4xf32>
  %1 = meg.transpose %0 [2, 0, 1] : tensor<3x4x2xf32>
  %2 = meg.transpose %0 [1, 2, 0] : tensor<3x4x2xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// Transposing twice by the same swap is the identity.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NOT: meg.transpose
// CHECK: return %[[X]]
func.func @transpose_inverse(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = meg.transpose %x [1, 0] : tensor<2x3xf32>
  %1 = meg.transpose %0 [1, 0] : tensor<3x2xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @slice_everything
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[S:.*]] = meg.slice %[[X]] [0, 0] [2, 4] [1, 2] : tensor<2x8xf32>
// CHECK-NEXT: return %[[X]], %[[S]]
func.func @slice_everything(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x4xf32>) {
  %0 = meg.slice %x [0, 0] [2, 8] [1, 1] : tensor<2x8xf32>
  %1 = meg.slice %x [0, 0] [2, 4] [1, 2] : tensor<2x8xf32>
  return %0, %1 : tensor<2x8xf32>, tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @concat_single
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[C:.*]] = meg.concat %[[X]], %[[X]] axis 1
// CHECK-NEXT: return %[[X]], %[[C]]
func.func @concat_single(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x16xf32>) {
  %0 = meg.concat %x axis 0 : tensor<2x8xf32>
  %1 = meg.concat %x, %x axis 1 : tensor<2x8xf32>, tensor<2x8xf32>
  return %0, %1 : tensor<2x8xf32>, tensor<2x16xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<1x8xf32>)
// CHECK-NEXT: %[[B:.*]] = meg.broadcast %[[X]] : tensor<1x8xf32> to tensor<4x8xf32>
// CHECK-NEXT: return %[[X]], %[[B]]
func.func @broadcast_same_type(%x: tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<4x8xf32>) {
  %0 = meg.broadcast %x : tensor<1x8xf32> to tensor<1x8xf32>
  %1 = meg.broadcast %x : tensor<1x8xf32> to tensor<4x8xf32>
  return %0, %1 : tensor<1x8xf32>, tensor<4x8xf32>
}

// -----

// Folds compose: the whole chain disappears.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @chain(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant dense<-0.0> : tensor<2x4xf32>
  %one = arith.constant dense<1.0> : tensor<4xf32>
  %0 = meg.reshape %x : tensor<2x4xf32> to tensor<8xf32>
  %1 = meg.reshape %0 : tensor<8xf32> to tensor<2x4xf32>
  %2 = meg.transpose %1 [1, 0] : tensor<2x4xf32>
  %3 = meg.transpose %2 [1, 0] : tensor<4x2xf32>
  %4 = meg.add %3, %zero : tensor<2x4xf32>, tensor<2x4xf32>
  %5 = meg.mul %one, %4 : tensor<4xf32>, tensor<2x4xf32>
  %6 = meg.neg %5 : tensor<2x4xf32>
  %7 = meg.neg %6 : tensor<2x4xf32>
  %8 = meg.cast %7 : tensor<2x4xf32> to tensor<2x4xf32>
  %9 = meg.broadcast %8 : tensor<2x4xf32> to tensor<2x4xf32>
  %10 = meg.concat %9 axis 1 : tensor<2x4xf32>
  %11 = meg.slice %10 [0, 0] [2, 4] [1, 1] : tensor<2x4xf32>
  return %11 : tensor<2x4xf32>
}

// -----

// AdamW reads a gradient widened exactly (bf16 to f32) without the cast;
// a rounding cast (f32 to bf16) stays.
// CHECK-LABEL: func.func @adamw_reads_narrow_gradient
// CHECK-SAME: (%[[P:.*]]: tensor<4xf32>, %[[G:.*]]: tensor<4xbf16>, %[[M:.*]]: tensor<4xf32>, %[[T:.*]]: tensor<i64>, %[[F:.*]]: tensor<4xf32>)
// CHECK: meg.adamw %[[P]], %[[G]], %[[M]], %[[M]], %[[T]] {{.*}} : tensor<4xf32>, tensor<4xbf16>,
// CHECK: %[[R:.*]] = meg.cast %[[F]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: meg.adamw %[[P]], %[[R]], %[[M]], %[[M]], %[[T]] {{.*}} : tensor<4xf32>, tensor<4xbf16>,
func.func @adamw_reads_narrow_gradient(%p: tensor<4xf32>, %g: tensor<4xbf16>, %m: tensor<4xf32>, %t: tensor<i64>, %f: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %w = meg.cast %g : tensor<4xbf16> to tensor<4xf32>
  %0:3 = meg.adamw %p, %w, %m, %m, %t config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
  %r = meg.cast %f : tensor<4xf32> to tensor<4xbf16>
  %1:3 = meg.adamw %p, %r, %m, %m, %t config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>) : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
  return %0#0, %1#0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// This rank's piece of a sum over the group is a reduce-scatter, through a
// transpose too; the all-reduce goes (a collective is never dead code).
// CHECK-LABEL: func.func @slice_of_sum
// CHECK-NOT: meg.all_reduce
// CHECK: %[[T:.*]] = meg.transpose %arg0 [1, 0, 2] : tensor<2x8x4xf32>
// CHECK-NEXT: %[[RS:.*]] = meg.reduce_scatter %[[T]] over @world[tp] dim 0 sum : tensor<8x2x4xf32> -> tensor<4x2x4xf32>
// CHECK-NEXT: %[[RS2:.*]] = meg.reduce_scatter %arg1 over @world[tp] dim 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[RS]], %[[RS2]]
meg.mesh @world [tp = 2]
meg.submesh @world[tp]
func.func @slice_of_sum(%x: tensor<2x8x4xf32>, %y: tensor<8x4xf32>) -> (tensor<4x2x4xf32>, tensor<4x4xf32>) {
  %s = meg.all_reduce %x over @world[tp] sum : tensor<2x8x4xf32>
  %t = meg.transpose %s [1, 0, 2] : tensor<2x8x4xf32>
  %p = meg.shard_slice %t over @world[tp] dim 0 : tensor<8x2x4xf32> -> tensor<4x2x4xf32>
  %s2 = meg.all_reduce %y over @world[tp] sum : tensor<8x4xf32>
  %p2 = meg.shard_slice %s2 over @world[tp] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %p, %p2 : tensor<4x2x4xf32>, tensor<4x4xf32>
}

// -----

// Not when the sum is used elsewhere, is an average, or is over another
// group.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: meg.all_reduce
// CHECK-COUNT-3: meg.shard_slice
meg.mesh @world [dp = 2, tp = 2]
meg.submesh @world[tp]
meg.submesh @world[dp]
func.func @kept(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s = meg.all_reduce %x over @world[tp] sum : tensor<8x4xf32>
  %a = meg.all_reduce %x over @world[tp] avg : tensor<8x4xf32>
  %d = meg.all_reduce %x over @world[dp] sum : tensor<8x4xf32>
  %p = meg.shard_slice %s over @world[tp] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %q = meg.shard_slice %a over @world[tp] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %r = meg.shard_slice %d over @world[tp] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %s, %p, %q, %r : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// silu(gate) * up, in either order, is one swiglu when nothing else reads
// the silu.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[G:.*]]: tensor<2x8xbf16>, %[[U:.*]]: tensor<2x8xbf16>)
// CHECK-NOT: meg.silu
// CHECK-DAG: %[[A:.*]] = meg.swiglu %[[G]], %[[U]] : tensor<2x8xbf16>
// CHECK-DAG: %[[B:.*]] = meg.swiglu %[[U]], %[[G]] : tensor<2x8xbf16>
// CHECK-NOT: meg.mul
// CHECK: return %[[A]], %[[B]]
func.func @swiglu(%g: tensor<2x8xbf16>, %u: tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>) {
  %s = meg.silu %g : tensor<2x8xbf16>
  %a = meg.mul %s, %u : tensor<2x8xbf16>, tensor<2x8xbf16>
  %t = meg.silu %u : tensor<2x8xbf16>
  %b = meg.mul %g, %t : tensor<2x8xbf16>, tensor<2x8xbf16>
  return %a, %b : tensor<2x8xbf16>, tensor<2x8xbf16>
}

// -----

// The swiglu keeps the product's records: recomputation finds a layer's
// units by meg.layer, so a swiglu without it would cut the MLP out of them.
// CHECK-LABEL: func.func @swiglu_keeps_records
// CHECK: meg.swiglu {{.*}}{meg.layer = 3 : i64, meg.pipeline_pass = "forward.mb1"}
func.func @swiglu_keeps_records(%g: tensor<2x8xbf16>, %u: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %s = meg.silu %g {meg.layer = 3 : i64} : tensor<2x8xbf16>
  %a = meg.mul %s, %u {meg.layer = 3 : i64, meg.pipeline_pass = "forward.mb1"} : tensor<2x8xbf16>, tensor<2x8xbf16>
  return %a : tensor<2x8xbf16>
}

// -----

// A silu read elsewhere stays (swiglu would compute it twice), and so does
// a product that broadcasts.
// CHECK-LABEL: func.func @swiglu_no_match
// CHECK: meg.silu
// CHECK: meg.mul
// CHECK: meg.silu
// CHECK: meg.mul
// CHECK-NOT: meg.swiglu
func.func @swiglu_no_match(%g: tensor<2x8xf32>, %u: tensor<2x8xf32>, %r: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = meg.silu %g : tensor<2x8xf32>
  %a = meg.mul %s, %u : tensor<2x8xf32>, tensor<2x8xf32>
  %t = meg.silu %g : tensor<2x8xf32>
  %b = meg.mul %t, %r : tensor<2x8xf32>, tensor<8xf32>
  return %a, %s, %b : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-approximate-math{fma=1}))' | FileCheck %s
// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-approximate-math))' | FileCheck %s --check-prefix=NOFMA

// exp, log and tanh become polynomials (arith, vectorizable); sin and cos
// stay libm calls. With FMA the polynomials use math.fma, without it a
// multiply and an add.
// CHECK-LABEL: func.func @k
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK: math.fma
// CHECK: math.sin
// NOFMA-LABEL: func.func @k
// NOFMA-NOT: math.fma
// NOFMA: math.sin
func.func @k(%x: f32) -> (f32, f32, f32, f32) {
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  %s = math.sin %x : f32
  return %e, %l, %t, %s : f32, f32, f32, f32
}

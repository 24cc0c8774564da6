// RUN: megc-opt %s --pass-pipeline='builtin.module(func.func(meg-expand-bf16))' | FileCheck %s

// bf16 conversions become integer arithmetic; maximumf stays (its
// reductions stay vector reductions).
// CHECK-LABEL: func.func @k
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: arith.maximumf
func.func @k(%a: bf16, %b: f32) -> (bf16, f32) {
  %w = arith.extf %a : bf16 to f32
  %m = arith.maximumf %w, %b : f32
  %n = arith.truncf %m : f32 to bf16
  return %n, %m : bf16, f32
}

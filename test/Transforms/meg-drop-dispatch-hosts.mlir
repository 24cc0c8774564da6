// RUN: megc-opt %s --meg-drop-dispatch-hosts | FileCheck %s

// The kernel function (meg.kernel_strategy), whose dispatch table megc has
// read, goes; its dispatch functions stay.
// CHECK-NOT: func.func @k(
// CHECK: func.func @k_d0(
// CHECK-NOT: func.func @k(
module {
  func.func @k(%x: memref<8xf32>) attributes {
      meg.kernel_strategy = #meg.kernel_strategy<serial, domain = [], tile = [], vector = 4>} {
    scf.forall (%wg) in (1) {
      func.call @k_d0(%x, %wg) : (memref<8xf32>, index) -> ()
    }
    return
  }
  func.func @k_d0(%x: memref<8xf32> {llvm.noalias}, %wg: index) {
    return
  }
}

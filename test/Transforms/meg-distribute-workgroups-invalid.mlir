// RUN: megc-opt %s --meg-distribute-workgroups -verify-diagnostics

// expected-error @below {{kernel has no meg.kernel_strategy; run meg-select-kernel-strategy first}}
func.func @unplanned(%x: memref<8xf32>) {
  return
}

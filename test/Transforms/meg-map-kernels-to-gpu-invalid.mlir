// RUN: megc-opt %s -split-input-file --meg-map-kernels-to-gpu -verify-diagnostics
// RUN: not megc-opt %s --meg-map-kernels-to-gpu=threads-per-block=48 2>&1 | FileCheck %s --check-prefix=THREADS

// THREADS: meg-map-kernels-to-gpu: threads-per-block 48 is not a multiple of 32 up to 1024

func.func @undistributed(%x: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  // expected-error @below {{kernel 'undistributed' has a loop nest outside its dispatches; run meg-distribute-workgroups first}}
  linalg.fill ins(%zero : f32) outs(%x : memref<8xf32>)
  return
}

// -----

func.func @allocates(%x: memref<8xf32>) {
  scf.forall (%wg) in (1) {
    // expected-error @below {{cannot run on a GPU: kernel 'allocates' allocates inside a dispatch}}
    %t = memref.alloc() : memref<8xf32>
    memref.copy %x, %t : memref<8xf32> to memref<8xf32>
  }
  return
}

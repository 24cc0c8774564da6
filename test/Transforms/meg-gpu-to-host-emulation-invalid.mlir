// RUN: megc-opt %s --split-input-file --verify-diagnostics --meg-gpu-to-host-emulation

// An access to a buffer that no view chain leads back to is an error.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @untraced(%a: memref<4xf32>, %b: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %p = arith.cmpi eq, %t, %c0 : index
      %m = arith.select %p, %a, %b : memref<4xf32>
      // expected-error @+1 {{emulation: kernel 'untraced' accesses a buffer that cannot be traced to an argument, a workgroup buffer or a constant}}
      %v = memref.load %m[%c0] : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// Ops the emulator cannot run are named.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @printing(%a: memref<4xf32>) kernel {
      // expected-error @+1 {{emulation: kernel 'printing' has 'gpu.printf', which the GPU emulator does not run}}
      gpu.printf "hello"
      gpu.return
    }
  }
}

// RUN: megc-opt %s --meg-set-target | FileCheck %s --check-prefix=CPU
// RUN: megc-opt %s --meg-set-target=vector-bits=512 | FileCheck %s --check-prefix=AVX512
// RUN: megc-opt %s --meg-set-target="target=cuda cuda-arch=sm_100a" | FileCheck %s --check-prefix=CUDA
// RUN: megc-opt %s --meg-set-target=target=cuda | FileCheck %s --check-prefix=DEFAULT

// RUN: not megc-opt %s --meg-set-target=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not megc-opt %s --meg-set-target="target=cuda cuda-arch=sm_80" 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not megc-opt %s --meg-set-target=vector-bits=48 2>&1 | FileCheck %s --check-prefix=BITS

// The options, parsed once, become the module's #meg.target; a target
// already there is replaced.
// CPU: module attributes {meg.target = #meg.target<cpu, vector_bits = 128>}
// AVX512: module attributes {meg.target = #meg.target<cpu, vector_bits = 512>}
// CUDA: module attributes {meg.target = #meg.target<cuda, arch = "sm_100a">}
// DEFAULT: module attributes {meg.target = #meg.target<cuda, arch = "sm_90">}
// TARGET: meg-set-target: unknown target 'tpu'; expected cpu or cuda
// ARCH: meg-set-target: unsupported cuda-arch 'sm_80'; expected sm_90 or newer
// BITS: meg-set-target: vector_bits 48 is not a power of two from 32 to 512
module attributes {meg.target = #meg.target<cpu, vector_bits = 256>} {
}

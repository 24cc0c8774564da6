//===- Passes.td - megc kernel back-end passes -------------*- tablegen -*-===//
//
// The passes between the program's kernel functions (meg ops on tensors)
// and target code: bufferization, strategy selection, the dispatch grid,
// the CPU realisation and the GPU mapping. They run on a module of kernel
// functions, which `megc` builds from the entry points; megc-opt runs each
// alone.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_KERNELS_PASSES_TD
#define MEGC_KERNELS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegPrepareKernels : Pass<"meg-prepare-kernels", "::mlir::ModuleOp"> {
  let summary = "Fuses a kernel's elementwise loops and materialises its "
                "results";
  let description = [{
    On kernel functions in linalg on tensors: merges each elementwise
    `linalg.generic` into its consumer when the consumer is its only user
    (so that a fused kernel is one loop nest per reduction and its
    intermediates never reach memory), and copies every returned value that
    no linalg op computes (a view of an input, a constant) into a fresh
    tensor, so that bufferization turns every result into an out-parameter
    the kernel writes.

    ```mlir
    // before
    %a = linalg.generic {...} ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
      ^bb0(%in: f32, %out: f32):
        %n = arith.negf %in : f32
        linalg.yield %n : f32
    } -> tensor<8xf32>
    %b = linalg.generic {...} ins(%a : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
      ^bb0(%in: f32, %out: f32):
        %m = math.exp %in : f32
        linalg.yield %m : f32
    } -> tensor<8xf32>
    return %b, %x : tensor<8xf32>, tensor<8xf32>
    // after: one generic computing exp(-x), and a copy of %x
    %b = linalg.generic {...} ins(%x : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
      ^bb0(%in: f32, %out: f32):
        %n = arith.negf %in : f32
        %m = math.exp %n : f32
        linalg.yield %m : f32
    } -> tensor<8xf32>
    %c = linalg.copy ins(%x : tensor<8xf32>) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
    return %b, %c : tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MegCopiesToLinalg : Pass<"meg-copies-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Turns memref.copy into linalg.copy";
  let description = [{
    A strided `memref.copy` would lower to a call into MLIR's C runner
    library, which the runtime does not carry; as `linalg.copy` it becomes
    loops inside the kernel, which the dispatch grid can split.

    ```mlir
    // before
    memref.copy %a, %view : memref<4x8xf32> to memref<4x8xf32, strided<[16, 1]>>
    // after
    linalg.copy ins(%a : memref<4x8xf32>)
                outs(%view : memref<4x8xf32, strided<[16, 1]>>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MegUpdateInPlace : Pass<"meg-update-in-place", "::mlir::ModuleOp"> {
  let summary = "Lets a kernel write results into the arguments it updates";
  let description = [{
    On destination-passing kernels whose function carries `meg.in_place`
    (per result, the argument it overwrites, or -1), which the program
    builder sets for the optimizer's elementwise update of its state: the
    out-parameter of each such result is replaced by that argument and
    removed, so that the kernel reads and writes the state in its own
    buffer. The attribute is consumed.

    ```mlir
    // before
    func.func @k(%p: memref<8xf32>, %g: memref<8xf32>, %out: memref<8xf32>)
        attributes {meg.in_place = array<i64: 0>} {
      linalg.generic ... ins(%p, %g : ...) outs(%out : memref<8xf32>) {...}
    }
    // after
    func.func @k(%p: memref<8xf32>, %g: memref<8xf32>) {
      linalg.generic ... ins(%p, %g : ...) outs(%p : memref<8xf32>) {...}
    }
    ```
  }];
}

def MegForwardResults : Pass<"meg-forward-results", "::mlir::ModuleOp"> {
  let summary = "Computes results in their out-parameters instead of copying";
  let description = [{
    Bufferization can leave a kernel computing a result in a temporary
    (`memref.alloc`) that a final `linalg.copy` (or `memref.copy`) moves into
    the out-parameter, for instance when the value is a loop's result. When
    the out-parameter is used by that copy only and the temporary has the
    same type and is not used after the copy, the temporary is replaced by
    the out-parameter and the copy removed: one pass over the result less.

    ```mlir
    // before
    %t = memref.alloc() : memref<8x4xf32>
    linalg.fill ins(%zero : f32) outs(%t : memref<8x4xf32>)
    scf.for ... { /* updates %t */ }
    linalg.copy ins(%t : memref<8x4xf32>) outs(%out : memref<8x4xf32>)
    // after
    linalg.fill ins(%zero : f32) outs(%out : memref<8x4xf32>)
    scf.for ... { /* updates %out */ }
    ```
  }];
}

def MegOnlineSoftmax : Pass<"meg-online-softmax", "::mlir::func::FuncOp"> {
  let summary = "Reduces a row's maximum and sum of exponentials in one pass";
  let description = [{
    On bufferized kernels, for the GPU: a reduction of an input's maximum
    into `m` followed by the sum of `exp(x - m)` over the same input and
    iteration space into `s` (zero-filled between them), the statistics of
    a softmax or a cross-entropy, becomes one `linalg.generic` with both
    outputs, marked `meg.online_softmax`. Its body folds each element into
    the pair with one exponential, rescaling the sum when the maximum
    grows:

        d = exp(min(m, x) - max(m, x))    (0 while the maximum is -inf)
        s = x > m ? s * d + 1 : s + d
        m = max(m, x)

    so the input is read once instead of twice. The result is the same up
    to rounding (the terms are summed at different scales).
    `meg-map-kernels-to-gpu` splits such a row over a warp or a block and
    combines the threads' pairs with the same rescaling. Nests of another
    form are left alone.

    ```mlir
    // before
    linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
    linalg.generic {...} ins(%x : memref<4x1024xf32>) outs(%m : memref<4xf32>) {
      %0 = arith.maximumf %out, %in : f32 ...
    }
    linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
    linalg.generic {...} ins(%x, %m : ...) outs(%s : memref<4xf32>) {
      %0 = arith.subf %in, %in_m : f32
      %1 = math.exp %0 : f32
      %2 = arith.addf %out, %1 : f32 ...
    }
    // after
    linalg.fill ins(%neg_inf : f32) outs(%m : memref<4xf32>)
    linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
    linalg.generic {...} ins(%x : memref<4x1024xf32>)
        outs(%m, %s : memref<4xf32>, memref<4xf32>) {...}
        {meg.online_softmax}
    ```
  }];
  let statistics = [
    Statistic<"merged", "merged", "Pairs of reductions made one">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def MegSetTarget : Pass<"meg-set-target", "::mlir::ModuleOp"> {
  let summary = "Records the device the kernels are for as #meg.target";
  let description = [{
    Parses its options once into the module's `meg.target`
    (`#meg.target<cpu, vector_bits = N>` or `#meg.target<cuda, arch =
    "sm_NN">`), which the kernel passes read. The driver records the same
    attribute from `--target`, `--cpu` and `--cuda-arch`; this pass is how
    `megc-opt` pipelines and tests choose a target.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The device: cpu or cuda">,
    Option<"vectorBits", "vector-bits", "unsigned", /*default=*/"128",
           "CPU vector register width in bits (128 for baseline x86-64, "
           "512 with AVX-512)">,
    Option<"cudaArch", "cuda-arch", "std::string",
           /*default=*/"MEGC_DEFAULT_CUDA_ARCH",
           "CUDA architecture for target=cuda">
  ];
  let dependentDialects = ["::mlir::meg::MegDialect"];
}

def MegSelectKernelStrategy
    : Pass<"meg-select-kernel-strategy", "::mlir::ModuleOp"> {
  let summary = "Classifies every kernel and records its strategy";
  let description = [{
    On bufferized kernel functions (destination-passing, linalg on
    memrefs): finds the loop dimensions that the kernel's loop nests share
    from the outside in, classifies the kernel as `pointwise`,
    `row_reduction`, `column_reduction`, `full_reduction` or `serial`, and
    picks the workgroup tile of those dimensions and the vector width for
    the module's `meg.target` (`#meg.target`; the CPU with 128-bit vectors
    without one). The choice is recorded on the function as
    `meg.kernel_strategy` (see `#meg.kernel_strategy`); nothing else
    changes. The tiles depend on the shapes and the target only, never on
    the number of threads that will run them.

    CPU: at most 256 workgroups of at least 16K elements each (fewer for
    small kernels, one below that), outer dimensions split first, tiles
    whose inputs fit in 256 KB where possible; the vector width is the
    target's `vector_bits` over the element size. CUDA: tiles of at least one
    128-bit vector per thread of a block, and at most 8 blocks per
    streaming multiprocessor of the architecture (1056 on sm_90).

    ```mlir
    // before
    func.func @megk5_meg_rms_norm(%x: memref<2x256x512xf32>, ...) {
      linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]} ...
      linalg.generic {iterator_types = ["parallel", "parallel", "parallel"]} ...
    }
    // after
    func.func @megk5_meg_rms_norm(%x: memref<2x256x512xf32>, ...)
        attributes {meg.kernel_strategy = #meg.kernel_strategy<row_reduction,
                    domain = [2, 256], tile = [1, 16], vector = 4>} {...}
    ```
  }];
  let dependentDialects = ["::mlir::meg::MegDialect"];
}

def MegDistributeWorkgroups
    : Pass<"meg-distribute-workgroups", "::mlir::ModuleOp"> {
  let summary = "Splits every kernel into dispatches over its strategy's grid";
  let description = [{
    Realises each kernel function's `meg.kernel_strategy` on the dispatch
    grid. Afterwards the function body is: its temporaries (`memref.alloc`,
    which become the kernel's scratch), then one top-level `scf.forall`
    per dispatch whose induction variable is the workgroup id, in order.
    Within a dispatch every loop nest works on its workgroup's tile of the
    domain (subviews of its operands); consecutive nests share a dispatch as
    long as each reads only what its own workgroup wrote, so a norm's row
    statistics, its normalised output and its weight-gradient partials are
    computed from one pass over the workgroup's rows.

    A loop nest that reduces domain dimensions (a column or full reduction)
    writes its tile's result into a partials buffer `[workgroups, ...]`
    (initialised to the reduction's neutral element) instead of its output,
    and a later dispatch combines the partials into the output in workgroup
    order, after the output's initial value: the result is the same for any
    number of threads. Nests that do not fit the domain start a dispatch of
    their own (of one workgroup when nothing splits them).

    ```mlir
    // before (rms_norm_grad's weight gradient: a column reduction)
    linalg.fill ins(%zero : f32) outs(%dw : memref<512xf32>)
    linalg.generic {iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%x, %dy : memref<2x256x512xf32>, ...) outs(%dw : memref<512xf32>)
    // after
    %partials = memref.alloc() : memref<32x512xf32>
    scf.forall (%wg) in (32) {
      // this workgroup's 16 rows, reduced into %partials[%wg]
    }
    scf.forall (%wg) in (1) {
      linalg.fill ins(%zero : f32) outs(%dw : memref<512xf32>)
      // %dw[c] += %partials[g, c] for g = 0 .. 31, in order
    }
    ```
  }];
  let dependentDialects = ["::mlir::meg::MegDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::affine::AffineDialect"];
}

def MegOutlineCpuDispatches
    : Pass<"meg-outline-cpu-dispatches", "::mlir::ModuleOp"> {
  let summary = "Moves each dispatch of a kernel into a function of its own";
  let description = [{
    After `meg-distribute-workgroups`: the body of each top-level
    `scf.forall` of a kernel function becomes a function
    `<kernel>_d<N>(buffers..., %workgroup: index)` of the buffers it uses
    (kernel arguments and temporaries, each `llvm.noalias`), and the forall
    calls it. The kernel function is then the host-side description of its
    dispatches, which `megc` reads into the artifact's dispatch table and
    drops; the dispatch functions are what the CPU code contains.

    ```mlir
    // before
    func.func @k(%x: memref<64xf32>, %y: memref<64xf32>) {
      scf.forall (%wg) in (4) { ... %x ... %y ... }
    }
    // after
    func.func @k(%x: memref<64xf32>, %y: memref<64xf32>) {
      scf.forall (%wg) in (4) {
        func.call @k_d0(%x, %y, %wg) : (memref<64xf32>, memref<64xf32>, index) -> ()
      }
    }
    func.func @k_d0(%x: memref<64xf32> {llvm.noalias}, %y: memref<64xf32> {llvm.noalias},
                    %wg: index) { ... }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def MegDropDispatchHosts
    : Pass<"meg-drop-dispatch-hosts", "::mlir::ModuleOp"> {
  let summary = "Removes the kernel functions that describe CPU dispatches";
  let description = [{
    After `meg-outline-cpu-dispatches` and after `megc` has read each
    kernel's dispatch table from its kernel function (its temporaries and
    dispatches): erases those functions (the ones carrying
    `meg.kernel_strategy`), leaving the dispatch functions that the CPU
    code consists of. The first pass of `meg-lower-cpu-kernels`.

    ```mlir
    // before
    func.func @k(%x: memref<64xf32>) attributes {meg.kernel_strategy = ...} {
      scf.forall (%wg) in (4) { func.call @k_d0(%x, %wg) : ... }
    }
    func.func @k_d0(%x: memref<64xf32> {llvm.noalias}, %wg: index) { ... }
    // after
    func.func @k_d0(%x: memref<64xf32> {llvm.noalias}, %wg: index) { ... }
    ```
  }];
}

def MegReassociateReductions
    : Pass<"meg-reassociate-reductions", "::mlir::func::FuncOp"> {
  let summary = "Lets the reductions of linalg ops be vectorized";
  let description = [{
    Marks the combining operation of every linalg reduction (`arith.addf`,
    `arith.mulf`, `arith.maximumf`, `arith.minimumf` with the output's block
    argument) `fastmath<reassoc>`, so that LLVM's loop vectorizer may sum
    in vector lanes. The order of the additions then depends on the compiled
    code only: results stay the same from run to run and for any number of
    threads.

    ```mlir
    // before
    %s = arith.addf %out, %in : f32
    // after
    %s = arith.addf %out, %in fastmath<reassoc> : f32
    ```
  }];
}

def MegApproximateMath : Pass<"meg-approximate-math", "::mlir::func::FuncOp"> {
  let summary = "Replaces transcendental math ops by vectorizable polynomials";
  let description = [{
    Expands `math.exp`, `math.log`, `math.tanh`, `math.erf` and the other
    functions MLIR approximates with polynomials (accurate to a few ulp in
    f32) into arithmetic, so that loops calling them vectorize instead of
    calling libm once per element.

    ```mlir
    // before
    %e = math.exp %x : f32
    // after: range reduction, a polynomial and an exponent shift in arith
    ```
  }];
  let options = [
    Option<"fma", "fma", "bool", /*default=*/"false",
           "The target has fused multiply-add instructions; without them each "
           "math.fma of the polynomials becomes a multiply and an add "
           "(rather than a call to fmaf per element)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def MegExpandBf16 : Pass<"meg-expand-bf16", "::mlir::func::FuncOp"> {
  let summary = "Expands bf16 conversions into integer arithmetic";
  let description = [{
    `arith.extf` from bf16 becomes a shift and `arith.truncf` to bf16 a
    round-to-nearest-even on the bits (baseline x86-64 has no bf16
    instructions, and neither libgcc 12 nor compiler-rt 14 provides
    `__truncsfbf2`). Unlike `arith-expand{include-bf16}`, it leaves
    `arith.maximumf` and `arith.minimumf` alone, so that their reductions
    stay vector reductions.

    ```mlir
    // before
    %h = arith.truncf %x : f32 to bf16
    // after: bitcast, add the rounding bias, shift right by 16, bitcast
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MegMapKernelsToGpu : Pass<"meg-map-kernels-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turns every dispatch into a GPU launch of one block per "
                "workgroup";
  let description = [{
    After `meg-distribute-workgroups`: each top-level `scf.forall` of a
    kernel function (a dispatch, its induction variable the workgroup id)
    becomes a `gpu.launch` of one block of `threads-per-block` threads per
    workgroup, and each loop nest of the workgroup's tile becomes loops over
    the block's threads, by its form:

    - no reduction (pointwise, fills, copies): thread `t` takes iterations
      `t, t + T, ...` of the tile, so that neighbouring threads touch
      neighbouring elements. Where every operand that the innermost loop
      moves through is contiguous along it, and its rows (innermost extent
      and outer strides) split into whole 16-byte vectors of the widest
      such element, an iteration is a vector: `vector.load` / `vector.store`
      with the vector's alignment (128-bit accesses for the widest
      element), operands broadcast along the row loaded once per vector,
      the body once per lane. The vector loop runs when every such view's
      first element is aligned (one uniform check of its pointer and
      offset), the element loop otherwise;
    - a row reduction (the innermost loop reduces, reading every input
      along its contiguous dimension, with one associative combiner on a
      32-bit type, and rows of at least 32 elements): a warp per row when
      the tile has at least as many rows as the block has warps, a block
      per row otherwise. The lanes stride over the row, each keeping its
      partial in a register from the combiner's neutral element; the
      partials meet in a `gpu.subgroup_reduce` (warp) or `gpu.all_reduce`
      (block), and the first lane folds the total into the output;
    - a `meg.online_softmax` nest (a row's maximum and sum of
      exponentials, see `meg-online-softmax`) as a row reduction of
      (maximum, sum) pairs from (-inf, 0): the lanes' pairs meet in xor
      `gpu.shuffle`s of both at distances 1 to 16; for a block, lane 0 of
      each warp writes its pair to a workgroup buffer of the launch, and
      after a barrier the first thread folds the warps' pairs in warp
      order and then into the outputs (a second barrier before the next
      row). Each combine is the nest's own rescaling step;
    - a reduction across rows (the per-workgroup partials of a column
      reduction, the combine over them): a thread per output element, its
      reduction serial in loop order, the output in a register, when the
      tile has an output for every thread; with fewer outputs, a warp or
      block per output as for rows (lanes striding over the reduction), so
      that the combine of one column's partials does not run on one
      thread. Rows shorter than 32 elements also get a thread each.

    A tile that two or more loop nests of a dispatch read and none writes
    (the rows a norm reduces and then scales, a cross-entropy's logits
    reduced and then differentiated) is staged: a workgroup buffer of the
    launch, filled by a copy before the first reader (a pointwise nest,
    128-bit accesses where aligned), and read from there by every reader,
    so that the dispatch reads the tile from global memory once. Tiles go
    by the reads they save (size times readers less one), while they fit
    in `stage-bytes`; none is staged in a dispatch with a step that writes
    memory other than a nest's outputs.

    Steps that are not loop nests run on the block's first thread. A
    `gpu.barrier` separates each step from the next one that touches
    memory. The constants the launches read are sunk into them. A dispatch
    that allocates, or a loop nest outside the dispatches, is an error
    naming the kernel.

    ```mlir
    // before (a row sum, the tile one row of 4096)
    scf.forall (%wg) in (64) {
      %row = memref.subview %x[%wg, 0] [1, 4096] [1, 1] : ...
      linalg.generic {iterator_types = ["parallel", "reduction"]}
          ins(%row : ...) outs(%sum : ...) {...}
    }
    // after
    gpu.launch blocks(%b, %by, %bz) in (%gx = %c64, ...)
               threads(%t, %ty, %tz) in (%tx = %c256, ...) {
      %p = scf.for %r = %t to %c4096 step %c256 iter_args(%a = %zero) -> f32 {...}
      %total = gpu.all_reduce add %p uniform {} : (f32) -> f32
      gpu.barrier
      scf.if %first { /* %sum[%b] += %total */ }
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"threadsPerBlock", "threads-per-block", "unsigned",
           /*default=*/"256", "Threads of each block (a multiple of 32, up "
           "to 1024)">,
    Option<"stageBytes", "stage-bytes", "int64_t", /*default=*/"24576",
           "Shared memory per block for tiles that several nests read "
           "(0: none staged)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect"];
}

def MegAlignWorkgroupBuffers
    : Pass<"meg-align-workgroup-buffers", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Aligns every workgroup buffer of an outlined kernel for "
                "vector accesses";
  let description = [{
    After `gpu-kernel-outlining`: gives every workgroup attribution of each
    `gpu.func` the `llvm.align` that `convert-gpu-to-nvvm` gives the
    shared-memory global it makes (unless it has a larger one). Without it
    a buffer is aligned to its element only, and the 128-bit accesses that
    `meg-map-kernels-to-gpu` emits for a tile staged there would find it
    misaligned and take their element loop.

    ```mlir
    // before
    gpu.func @k(...) workgroup(%tile : memref<4x1024xbf16, #gpu.address_space<workgroup>>) kernel
    // after
    gpu.func @k(...) workgroup(%tile : memref<4x1024xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "uint64_t", /*default=*/"16",
           "Bytes each buffer is aligned to (a power of two)">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MegLowerGpuReductions
    : Pass<"meg-lower-gpu-reductions", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Lowers block and warp reductions to shuffles";
  let description = [{
    On outlined GPU kernels after `convert-scf-to-cf`: rewrites each
    `gpu.all_reduce` (a block reduction) into xor shuffles within each
    warp, a shared-memory buffer of one value per warp, a barrier and a
    second shuffle round, and each `gpu.subgroup_reduce` (a warp reduction)
    into a butterfly of `subgroup-size` xor shuffles, with MLIR's own
    lowerings, which `convert-gpu-to-nvvm` does not apply. A reduction they
    do not cover (non-uniform, wider than 32 bits) is an error.

    ```mlir
    // before
    %s = gpu.subgroup_reduce add %p uniform : (f32) -> f32
    // after
    %s1, %v1 = gpu.shuffle xor %p, %c1, %c32 : f32
    %a1 = arith.addf %p, %s1 : f32
    ...  // offsets 2, 4, 8, 16
    ```
  }];
  let options = [
    Option<"subgroupSize", "subgroup-size", "unsigned", /*default=*/"32",
           "Lanes of a warp">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect"];
}

def MegGpuToHostEmulation
    : Pass<"meg-gpu-to-host-emulation", "::mlir::ModuleOp"> {
  let summary = "Turns outlined GPU kernels into host functions for the GPU "
                "emulator (tests)";
  let description = [{
    On the outlined kernels as the NVVM lowering receives them (after the
    device preparation: `meg-lower-gpu-reductions`, `arith-expand`): each
    `gpu.func` becomes a `func.func` at the module's top level that the GPU
    emulator (`runtime/emulator`) calls once per thread, with the kernel's
    arguments followed by its workgroup buffers (which the emulator
    allocates per block; private buffers become allocas). Thread, block and
    lane ids, `gpu.barrier` and `gpu.shuffle` become calls to the
    emulator's hooks, and every load and store (scalar, vector, atomic) is
    announced to it first: its address, bytes, required alignment, the
    argument or workgroup buffer it reaches (traced through views), and
    whether its indices lie in its view. The emulator checks them and runs
    the barriers and shuffles with CUDA's rules. The interface is
    `megemu/Abi.h`; each function records its argument count, each
    argument's static extent and its workgroup buffers (`megemu.args`,
    `megemu.extents`, `megemu.workgroup`), the module its sites
    (`megemu.sites`). Ops the emulator cannot run are errors naming the
    kernel.

    ```mlir
    // before
    gpu.module @m {
      gpu.func @k(%a: memref<64xf32>) workgroup(%w : memref<64xf32, #gpu.address_space<workgroup>>) kernel {
        %t = gpu.thread_id x
        %v = memref.load %a[%t] : memref<64xf32>
        memref.store %v, %w[%t] : memref<64xf32, #gpu.address_space<workgroup>>
        gpu.barrier
        gpu.return
      }
    }
    // after
    func.func @k(%a: memref<64xf32>, %w: memref<64xf32>) attributes {megemu.args = 1 : i64, ...} {
      %t = call @megemu_id(%c0_i32) : (i32) -> index
      ...
      call @megemu_access(%address, %c4_i64, %flags, %c0_i32, %site, %inView) : (index, i64, i32, i32, i32, i32) -> ()
      %v = memref.load %a[%t] : memref<64xf32>
      ...
      call @megemu_barrier(%site2) : (i32) -> ()
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // MEGC_KERNELS_PASSES_TD

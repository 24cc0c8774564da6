//===- Passes.td - megc conversion passes ------------------*- tablegen -*-===//
//
// Passes that lower the meg dialect towards executable code.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_CONVERSION_PASSES_TD
#define MEGC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMegToLinalg : Pass<"convert-meg-to-linalg"> {
  let summary = "Lowers meg compute ops to linalg, tensor, arith and math";
  let description = [{
    Rewrites every meg op that computes values into upstream ops on tensors:
    `linalg.generic` for elementwise, broadcasting, reduction and contraction
    work (bf16 and f16 are computed in f32 and rounded once when stored),
    `tensor.extract_slice` / `tensor.insert_slice` / `tensor.collapse_shape` /
    `tensor.expand_shape` for data movement, `tensor.extract` inside the body
    for gathers (embedding, cross-entropy labels, RoPE partners), and an
    `scf.for` over the tokens for the embedding gradient's scatter-add. The result
    bufferizes with one-shot bufferization and lowers to LLVM or to GPU
    kernels with the upstream pipelines.

    Parameter reads, collectives and region ops are left for the program
    lowering; any other meg op that remains is an error naming it.

    Example:

    ```mlir
    // before
    %y = meg.add %a, %b : tensor<2x8xf32>, tensor<8xf32>
    // after
    %e = tensor.empty() : tensor<2x8xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> (d1)>,
                                          affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%a, %b : tensor<2x8xf32>, tensor<8xf32>)
        outs(%e : tensor<2x8xf32>) {
    ^bb0(%x: f32, %z: f32, %out: f32):
      %s = arith.addf %x, %z : f32
      linalg.yield %s : f32
    } -> tensor<2x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // MEGC_CONVERSION_PASSES_TD

//===- Passes.td - meg dialect passes ----------------------*- tablegen -*-===//
//
// Definitions of the passes that work on the meg dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_TRANSFORMS_PASSES_TD
#define MEGC_DIALECT_MEG_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegSummarize : Pass<"meg-summarize", "::mlir::ModuleOp"> {
  let summary = "Prints a summary of a meg model: parameters, meshes, ops";
  let description = [{
    An analysis pass that leaves the IR unchanged and writes a short report to
    standard output (or to the file named by `output`): the number of
    parameters and their total size (trainable and frozen), the mesh and the
    registered submeshes, the module configuration attributes, and the op
    counts of every function.

    Example: for a 2-layer Llama preset

    ```
    $ megc gen llama --layers 2 --hidden 128 --heads 8 --kv-heads 2 \
        --ffn 352 --vocab 512 --seq 64 --batch 2 \
        | megc-opt --meg-summarize -o /dev/null
    meg model summary
      parameters: 21 tensors, 0.48 M elements, 1.9 MB (trainable 21, frozen 0)
      func @forward: 98 ops
        meg.param_ref 21
        meg.linear 15
        ...
    ```
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the summary ('-' for standard output)">
  ];
}

#endif // MEGC_DIALECT_MEG_TRANSFORMS_PASSES_TD

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

def MegAutodiff : Pass<"meg-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    Adds a function (`name`, default `grad`) with the arguments of the loss
    function (`function`, default `loss`, which must return one scalar)
    that returns the loss and the gradient of the loss with respect to every
    trainable parameter, named `grad.<parameter>` and in declaration order.
    The loss is computed as before; the gradients are built in reverse op
    order from each op's vector-Jacobian product (the
    `DifferentiableOpInterface`), summing where a value has several uses.
    Frozen parameters get no gradient output, so canonicalization removes
    their weight-gradient work. Calls must be inlined first; an op on the
    path to the loss without a vector-Jacobian product is an error naming
    it.

    Example:

    ```mlir
    // before
    meg.param @w : tensor<4x4xf32> init #meg.init<normal(0.02)>
    func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
      %w = meg.param_ref @w : tensor<4x4xf32>
      %y = meg.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
      %l = meg.reduce mean %y dims [0, 1] : tensor<2x4xf32>
      return %l : tensor<f32>
    }
    // after: @loss unchanged, plus
    func.func @grad(%x: tensor<2x4xf32>) -> (tensor<f32> {meg.name = "loss"},
        tensor<4x4xf32> {meg.name = "grad.w"}) {
      ... forward ...
      %one = arith.constant dense<1.0> : tensor<f32>
      ... meg.broadcast, meg.matmul (transpose_lhs) ...
      return %l, %dw : tensor<f32>, tensor<4x4xf32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The function to differentiate (one scalar result)">,
    Option<"name", "name", "std::string", /*default=*/"\"grad\"",
           "Name of the function to add">
  ];
}

def MegPrecision : Pass<"meg-precision", "::mlir::ModuleOp"> {
  let summary = "Casts gradients to the precision policy's dtypes";
  let description = [{
    Applies the module's `meg.precision` policy to the gradient function
    built by meg-autodiff (`gradient`, default `grad`): every
    `grad.<parameter>` result, produced in the compute dtype, is cast to
    `main_grads` where (and only where) the two differ, so that the
    optimizer consumes gradients in the dtype the policy names. Without a
    policy the pass changes nothing. A policy this compiler cannot hold yet
    (`main_params` other than the parameter dtype, i.e. separate master
    weights) is an error naming the parameter.

    ```mlir
    // policy: param = bf16, main_grads = f32
    %g = ... : tensor<64x64xbf16>
    %g32 = meg.cast %g : tensor<64x64xbf16> to tensor<64x64xf32>
    return %loss, %g32 : tensor<f32>, tensor<64x64xf32>
    ```
  }];
  let options = [
    Option<"gradient", "gradient", "std::string", /*default=*/"\"grad\"",
           "The gradient function (loss first, then grad.<parameter>)">
  ];
}

def MegOptimizer : Pass<"meg-optimizer", "::mlir::ModuleOp"> {
  let summary = "Appends the AdamW update to the gradient function";
  let description = [{
    From the gradient function built by meg-autodiff (`grad`), adds
    `train_step` with the same arguments, which returns the loss and updates
    every trainable parameter with `meg.adamw` (hyper-parameters from the
    module's `meg.optimizer` attribute). The optimizer state becomes
    persistent `state` parameters: `optimizer.exp_avg.<p>` and
    `optimizer.exp_avg_sq.<p>` (zeros, in the policy's `exp_avg` /
    `exp_avg_sq` dtypes, f32 without a policy) and `optimizer.step` (an f32
    scalar counting steps, exact up to 2^24). Parameters and state are
    written with `meg.param_store` after all reads.

    ```mlir
    %s1 = meg.add %step, %one : tensor<f32>, tensor<f32>
    %p2, %m2, %v2 = meg.adamw %p, %g, %m, %v, %t config(#meg.adamw<...>) ...
    meg.param_store @w, %p2 : tensor<64x64xf32>
    meg.param_store @optimizer.exp_avg.w, %m2 : tensor<64x64xf32>
    ```
  }];
  let options = [
    Option<"gradient", "gradient", "std::string", /*default=*/"\"grad\"",
           "The gradient function (loss first, then grad.<parameter>)">,
    Option<"name", "name", "std::string", /*default=*/"\"train_step\"",
           "Name of the training step function to add">
  ];
}

#endif // MEGC_DIALECT_MEG_TRANSFORMS_PASSES_TD

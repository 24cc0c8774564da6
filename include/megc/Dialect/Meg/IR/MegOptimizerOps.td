//===- MegOptimizerOps.td - optimizer ops ------------------*- tablegen -*-===//
//
// The AdamW update of one parameter with its moments.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGOPTIMIZEROPS_TD
#define MEGC_DIALECT_MEG_IR_MEGOPTIMIZEROPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Meg_AdamWOp : Meg_Op<"adamw", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["param", "new_param"]>,
    AllTypesMatch<["exp_avg", "new_exp_avg"]>,
    AllTypesMatch<["exp_avg_sq", "new_exp_avg_sq"]>]> {
  let summary = "One AdamW step of a parameter";
  let description = [{
    Updates a (main) parameter and its first and second moments from its
    gradient; `step` is the 1-based step count used for bias correction.
    The moments are stored in their own dtypes and computed in f32; all four
    tensors have the same shape. `lr`, when given, is the learning rate at
    run time (an f32 scalar, the schedule's value) in place of the config's;
    `grad_scale` multiplies the gradient first (the clipping coefficient).
    `skip`, when given and not 0 (a `meg.count_nonfinite`), skips the
    update: the results are the parameter and moments as they were, in the
    same pass over them.
    Under a precision policy the gradient is in the `main_grads` dtype, or
    in a narrower one that widens to it exactly (bf16 or f16 for f32): the
    canonicalizer folds such a widening `meg.cast` into the update, which
    widens each element as it reads it, so that the wider copy of the
    gradient is never stored.

    ```mlir
    %p2, %m2, %v2 = meg.adamw %p, %g, %m, %v, %step
        config(#meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999,
                          eps = 1.0e-8, weight_decay = 0.01>)
        : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>,
          tensor<64x64xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$param, Meg_FloatTensor:$grad,
                       Meg_FloatTensor:$exp_avg, Meg_FloatTensor:$exp_avg_sq,
                       Meg_StepTensor:$step,
                       Optional<0DTensorOf<[F32]>>:$lr,
                       Optional<0DTensorOf<[F32]>>:$grad_scale,
                       Optional<0DTensorOf<[F32]>>:$skip,
                       Meg_AdamWAttr:$config);
  let results = (outs Meg_FloatTensor:$new_param,
                      Meg_FloatTensor:$new_exp_avg,
                      Meg_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step
    (`lr` `(` $lr^ `:` type($lr) `)`)?
    (`grad_scale` `(` $grad_scale^ `:` type($grad_scale) `)`)?
    (`skip` `(` $skip^ `:` type($skip) `)`)?
    `config` `(` qualified($config) `)` attr-dict
    `:` type($param) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `,` type($step)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Meg_CountNonfiniteOp : Meg_Op<"count_nonfinite", [Pure]> {
  let summary = "How many of some f32 scalars are NaN or infinite";
  let description = [{
    The number of `inputs` that are NaN or +-infinity, as an f32 scalar:
    the training step's check of its loss and gradient norm, whose updates
    run only where it is 0 (`meg.adamw ... skip`). meg-fsdp sums it over
    the data-parallel group, so that every rank skips the same steps.

    ```mlir
    %bad = meg.count_nonfinite %loss, %grad_norm : tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Meg_ScalarF32>:$inputs);
  let results = (outs Meg_ScalarF32:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

#endif // MEGC_DIALECT_MEG_IR_MEGOPTIMIZEROPS_TD

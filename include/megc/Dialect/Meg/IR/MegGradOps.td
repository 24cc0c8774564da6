//===- MegGradOps.td - backward ops ------------------------*- tablegen -*-===//
//
// Vector-Jacobian products of the forward ops whose backward is not a
// composition of other meg ops (or is worth one fused kernel).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGGRADOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGGRADOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Meg_SliceGradOp : Meg_Op<"slice_grad", [Pure]> {
  let summary = "Gradient of a strided slice: the slice scattered into zeros";
  let description = [{
    The transpose of `meg.slice`: a zero tensor of the result type whose
    elements at `offsets + i * strides` hold `grad[i]`.

    ```mlir
    %dx = meg.slice_grad %dy [0, 1] [1, 2] : tensor<4x4xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad $offsets $strides attr-dict `:` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Meg_EmbeddingGradOp : Meg_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of an embedding lookup with respect to the table";
  let description = [{
    Scatter-adds each row of `grad [..., H]` into row `ids[...]` of a zero
    table of the result type `[V, H]`; with `rows from %first`, into row
    `ids[...] - first` for the ids in `[first, first + V)` (the block of a
    vocab-parallel embedding).

    ```mlir
    %dt = meg.embedding_grad %dy, %ids
        : tensor<2x16x64xf32>, tensor<2x16xi32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_IndexTensor:$ids,
                       Optional<Meg_ScalarI32>:$first_row);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids (`rows` `from` $first_row^)? attr-dict `:` type($grad) `,`
    type($ids) (`,` type($first_row)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Meg_VocabShardStatsGradOp : Meg_Op<"vocab_shard_stats_grad", [Pure,
    AllTypesMatch<["logits", "result"]>,
    AllTypesMatch<["sum_exp_grad", "target_grad", "max"]>]> {
  let summary = "Logit gradient of vocab_shard_stats";
  let description = [{
    `dlogits[..., j] = dsum_exp * exp(logits[..., j] - max) + dtarget *
    (first + j == label)`, in f32, rounded to the logits' dtype.

    ```mlir
    %dl = meg.vocab_shard_stats_grad %ds, %dt, %logits, %max, %labels, %first
        : tensor<2x16xf32>, tensor<2x16x128xf32>, tensor<2x16xi32>, tensor<i32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$sum_exp_grad,
                       RankedTensorOf<[F32]>:$target_grad,
                       Meg_FloatTensor:$logits, RankedTensorOf<[F32]>:$max,
                       Meg_IndexTensor:$labels, Meg_ScalarI32:$first_class);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $sum_exp_grad `,` $target_grad `,` $logits `,` $max `,` $labels `,`
    $first_class attr-dict `:` type($max) `,` type($logits) `,` type($labels)
    `,` type($first_class)
  }];
  let hasVerifier = 1;
}

def Meg_RmsNormGradOp : Meg_Op<"rms_norm_grad", [Pure,
    AllTypesMatch<["grad", "input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "Gradients of rms_norm";
  let description = [{
    Given the output gradient, returns the gradients with respect to the
    input and the weight (summed over all rows), computed in f32.

    ```mlir
    %dx, %dw = meg.rms_norm_grad %dy, %x, %w eps 1.0e-05
        : tensor<2x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$input,
                       Meg_FloatTensor:$weight, F64Attr:$eps);
  let results = (outs Meg_FloatTensor:$input_grad,
                      Meg_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `eps` $eps attr-dict `:` type($input) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def Meg_LayerNormGradOp : Meg_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["grad", "input"]>, InferTypeOpAdaptor]> {
  let summary = "Gradients of layer_norm";
  let description = [{
    Returns the input gradient and, for the affine form (with `weight`), the
    weight and bias gradients.

    ```mlir
    %dx = meg.layer_norm_grad %dy, %x eps 1.0e-06 : tensor<2x256x512xf32>
    %dx2, %dw, %db = meg.layer_norm_grad %dy, %x weight %w eps 1.0e-05
        : tensor<2x256x512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$input,
                       Optional<Meg_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs Variadic<Meg_FloatTensor>:$results);
  let assemblyFormat = [{
    $grad `,` $input (`weight` $weight^)? `eps` $eps attr-dict `:` type($input)
    (`,` type($weight)^)?
  }];
}

def Meg_RopeGradOp : Meg_Op<"rope_grad", [Pure,
    AllTypesMatch<["grad", "result"]>]> {
  let summary = "Input gradient of the fused rotary embedding";
  let description = [{
    The exact transpose of `meg.rope` for any `cos`/`sin` tables: with
    half = rotary_dim / 2, half-split computes
    `dx[i] = dy[i] cos[i] + dy[i+half] sin[i+half]` for i < half and
    `dx[i] = dy[i] cos[i] - dy[i-half] sin[i-half]` otherwise; tail channels
    are copied.

    ```mlir
    %dx = meg.rope_grad %dy, %cos, %sin layout bshd
        : tensor<2x2048x32x128xbf16>, tensor<2048x128xf32>, tensor<2048x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$cos,
                       Meg_FloatTensor:$sin, Meg_RopeLayoutAttr:$layout,
                       UnitAttr:$interleaved);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $cos `,` $sin `layout` `` $layout (`interleaved` $interleaved^)?
    attr-dict `:` type($grad) `,` type($cos) `,` type($sin)
  }];
  let hasVerifier = 1;
}

def Meg_AttentionGradOp : Meg_Op<"attention_grad", [Pure,
    AttrSizedOperandSegments, AllTypesMatch<["grad", "output"]>,
    AllTypesMatch<["query", "query_grad"]>, AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>]> {
  let summary = "Gradients of attention with respect to q, k and v";
  let description = [{
    Flash-attention style backward: takes the output gradient and the
    forward output and recomputes the probabilities block by block. Given
    the forward's softmax statistics (`stats`, from `meg.attention ...
    stats`: `[B, H, Sq]` f32 log-sum-exp per query row), it uses them
    instead of recomputing them in a first pass over the keys. `positions`
    are the forward's (`meg.attention ... positions`).

    ```mlir
    %dq, %dk, %dv = meg.attention_grad %do, %q, %k, %v, %o causal scale 0.125
        : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>,
          tensor<2x16x2x32xf32>
    %dq2, %dk2, %dv2 = meg.attention_grad %do, %q, %k, %v, %o stats %lse
        causal scale 0.125
        : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>, tensor<2x16x2x32xf32>,
          tensor<2x16x2x32xf32>, tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$query,
                       Meg_FloatTensor:$key, Meg_FloatTensor:$value,
                       Meg_FloatTensor:$output,
                       Optional<RankedTensorOf<[F32]>>:$stats,
                       Optional<RankedTensorOf<[I32]>>:$positions,
                       UnitAttr:$causal, F64Attr:$scale);
  let results = (outs Meg_FloatTensor:$query_grad, Meg_FloatTensor:$key_grad,
                      Meg_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $output (`stats` $stats^)?
    (`causal` $causal^)?
    (`positions` `(` $positions^ `:` type($positions) `)`)? `scale` $scale
    attr-dict `:` type($grad) `,` type($query) `,` type($key) `,` type($value)
    (`,` type($stats)^)?
  }];
  let hasVerifier = 1;
}

def Meg_SoftmaxGradOp : Meg_Op<"softmax_grad", [Pure,
    SameOperandsAndResultType]> {
  let summary = "Input gradient of softmax";
  let description = [{
    `dx = y * (dy - sum(dy * y, axis))` from the forward output `y`.

    ```mlir
    %dx = meg.softmax_grad %dy, %y axis 3 : tensor<2x8x128x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$output,
                       I64Attr:$axis);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output `axis` $axis attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def Meg_CrossEntropyGradOp : Meg_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "Logit gradient of cross_entropy";
  let description = [{
    `dlogits = (softmax(logits) - onehot(labels)) * dloss` (divided by the
    token count for `mean`); with `ignore N`, zero in the rows whose label
    is `N`.

    ```mlir
    %dl = meg.cross_entropy_grad %dloss, %logits, %labels mean
        : tensor<2x16x128xf32>, tensor<2x16xi32>
    ```
  }];
  let arguments = (ins Meg_ScalarF32:$grad, Meg_FloatTensor:$logits,
                       Meg_IndexTensor:$labels, Meg_ReduceKindAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $labels `` $reduction (`ignore` $ignore_index^)?
    attr-dict `:` type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

def Meg_GeluGradOp : Meg_Op<"gelu_grad", !listconcat([Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Input gradient of gelu";
  let description = [{
    `dx = dy * gelu'(x)` for the same approximation as the forward op.

    ```mlir
    %dx = meg.gelu_grad %dy, %x approximate tanh : tensor<2x256x2048xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$input,
                       Meg_GeluApproximationAttr:$approximate);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `approximate` `` $approximate attr-dict `:` type($grad)
  }];
}

def Meg_SiluGradOp : Meg_Op<"silu_grad", !listconcat([Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Input gradient of silu";
  let description = [{
    `dx = dy * sigmoid(x) * (1 + x * (1 - sigmoid(x)))`.

    ```mlir
    %dx = meg.silu_grad %dy, %x : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$input);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}

def Meg_SwigluGradOp : Meg_Op<"swiglu_grad", !listconcat([Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Gradients of swiglu with respect to gate and up";
  let description = [{
    `dgate = dy * up * silu'(gate)`, `dup = dy * silu(gate)`.

    ```mlir
    %dg, %du = meg.swiglu_grad %dy, %gate, %up : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$gate,
                       Meg_FloatTensor:$up);
  let results = (outs Meg_FloatTensor:$gate_grad, Meg_FloatTensor:$up_grad);
  let assemblyFormat = "$grad `,` $gate `,` $up attr-dict `:` type($grad)";
}

#endif // MEGC_DIALECT_MEG_IR_MEGGRADOPS_TD

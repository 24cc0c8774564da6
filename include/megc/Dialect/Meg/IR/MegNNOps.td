//===- MegNNOps.td - transformer forward ops ---------------*- tablegen -*-===//
//
// Forward ops of transformer layers: embedding, matrix products,
// normalisation, rotary embedding, attention, activations, softmax,
// cross-entropy and adaLN modulation.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGNNOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGNNOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "megc/Dialect/Meg/IR/MegInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Meg_EmbeddingOp : Meg_Op<"embedding", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Looks up rows of an embedding table";
  let description = [{
    `result[..., :] = table[ids[...], :]`; the result has the ids' shape
    with the hidden size appended. Generated kernels clamp ids into
    [0, vocab) so that a bad id cannot read outside the table.

    With `rows from %first` the table holds rows `[first, first + V)` of a
    larger one (a vocab-parallel embedding's block on one tensor-parallel
    rank): an id in that range reads row `id - first`, any other gives a
    zero row, which the sum over the ranks fills in.

    ```mlir
    %h = meg.embedding %table, %ids : tensor<32000x4096xbf16>, tensor<2x2048xi32>
    %p = meg.embedding %block, %ids rows from %first
        : tensor<16000x4096xbf16>, tensor<2x2048xi32>, tensor<i32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$table, Meg_IndexTensor:$ids,
                       Optional<Meg_ScalarI32>:$first_row);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids (`rows` `from` $first_row^)? attr-dict `:` type($table)
    `,` type($ids) (`,` type($first_row)^)?
  }];
}

def Meg_MatmulOp : Meg_Op<"matmul",
    [Meg_VJP, Meg_MatrixProduct, Pure, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product";
  let description = [{
    Multiplies the trailing two dimensions: `lhs [..., M, K] x rhs [..., K, N]
    -> [..., M, N]` (with `transpose_lhs` / `transpose_rhs` the respective
    trailing pair is swapped first). Batch dimensions must be equal, or `rhs`
    is 2-D and shared by every batch. Accumulation is in f32.

    ```mlir
    %s = meg.matmul %q, %k transpose_rhs
        : tensor<2x8x128x64xf32>, tensor<2x8x128x64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$lhs, Meg_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Meg_LinearOp : Meg_Op<"linear",
    [Meg_VJP, Meg_TP, Meg_MatrixProduct, Pure, InferTypeOpAdaptor]> {
  let summary = "Affine layer with a [out, in] weight";
  let description = [{
    `result = input @ weight^T (+ bias)` with the weight laid out
    `[out_features, in_features]` as in PyTorch's `nn.Linear`.

    ```mlir
    %y = meg.linear %x, %w : tensor<2x2048x4096xbf16>, tensor<11008x4096xbf16>
    %z = meg.linear %x, %w bias %b
        : tensor<2x16x64xf32>, tensor<32x64xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, Meg_FloatTensor:$weight,
                       Optional<Meg_FloatTensor>:$bias);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)?
  }];
}

def Meg_RmsNormOp : Meg_Op<"rms_norm", [Meg_VJP, Meg_TP, Pure, Meg_RowReduction,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Root-mean-square normalisation over the last dimension";
  let description = [{
    `result = input / sqrt(mean(input^2, -1) + eps) * weight`, computed in
    f32 and rounded once to the input dtype (Llama's `LlamaRMSNorm`).

    ```mlir
    %y = meg.rms_norm %x, %w eps 1.0e-05 : tensor<2x2048x4096xbf16>, tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, Meg_FloatTensor:$weight,
                       F64Attr:$eps);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $eps attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Meg_LayerNormOp : Meg_Op<"layer_norm", [Meg_VJP, Meg_TP, Pure, Meg_RowReduction,
    AttrSizedOperandSegments,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Layer normalisation over the last dimension";
  let description = [{
    `result = (input - mean) / sqrt(var + eps) (* weight + bias)`, computed
    in f32. Without `affine` weights (as in the adaLN blocks of MMDiT and
    Flux) only the normalisation is applied.

    ```mlir
    %y = meg.layer_norm %x eps 1.0e-06 : tensor<2x256x512xf32>
    %z = meg.layer_norm %x affine %w, %b eps 1.0e-05
        : tensor<2x256x512xf32>, tensor<512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input,
                       Optional<Meg_FloatTensor>:$weight,
                       Optional<Meg_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`affine` $weight^ `,` $bias)? `eps` $eps attr-dict `:` type($input)
    (`,` type($weight)^ `,` type($bias))?
  }];
  let hasVerifier = 1;
}

def Meg_RopeOp : Meg_Op<"rope", [Meg_VJP, Meg_TP, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Fused rotary position embedding";
  let description = [{
    Rotates the first `rotary_dim` channels of every head by position
    dependent angles; the remaining channels pass through. `cos` and `sin`
    have shape `[S', rotary_dim]` with `S' >= S` (a table longer than the
    sequence is allowed; the first `S` rows are used) and hold the cosines
    and sines of the embedding laid out for the chosen form: half-split
    (`[f0..f(k-1), f0..f(k-1)]`) or `interleaved` (`[f0, f0, f1, f1, ...]`).
    With half = rotary_dim / 2, half-split computes
    `y[i] = x[i] cos[i] - x[i+half] sin[i]` for i < half and
    `y[i] = x[i] cos[i] + x[i-half] sin[i]` otherwise; interleaved pairs
    neighbouring channels. Math is f32 with one rounding. `layout` is `bshd`
    ([batch, seq, heads, head_dim]) or `sbhd`.

    ```mlir
    %q2 = meg.rope %q, %cos, %sin layout bshd
        : tensor<2x2048x32x128xbf16>, tensor<2048x128xf32>, tensor<2048x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, Meg_FloatTensor:$cos,
                       Meg_FloatTensor:$sin, Meg_RopeLayoutAttr:$layout,
                       UnitAttr:$interleaved);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin `layout` `` $layout (`interleaved` $interleaved^)?
    attr-dict `:` type($input) `,` type($cos) `,` type($sin)
  }];
  let extraClassDeclaration = [{
    int64_t getRotaryDim() {
      return ::llvm::cast<::mlir::RankedTensorType>(getCos().getType())
          .getShape().back();
    }
  }];
  let hasVerifier = 1;
}

def Meg_AttentionOp : Meg_Op<"attention", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Scaled dot-product attention with grouped KV heads";
  let description = [{
    `softmax(q k^T * scale (+ causal mask)) v` per head, in the bshd layout:
    `q [B, Sq, H, D]`, `k [B, Skv, Hkv, D]`, `v [B, Skv, Hkv, Dv]` with `H` a
    multiple of `Hkv` (query head `h` reads KV head `h / (H / Hkv)`); the
    result is `[B, Sq, H, Dv]`. `causal` masks keys after the query position
    (aligned to the end when Skv > Sq). Lowerings never materialise the
    S x S score matrix on the GPU.

    With `positions` (causal only: `[Sq]` i32, non-decreasing) query `i`
    stands at position `positions[i]` of the key sequence and sees the keys
    `j <= positions[i]`: the queries of one rank of a context-parallel group
    (chunks of a longer sequence) against all of its keys. Without, query
    `i` stands at `i + Skv - Sq`.

    With `stats` the op also returns the softmax statistics of every query
    row, `[B, H, Sq]` f32: the natural-log log-sum-exp of the row's scaled
    (and masked) scores, `+inf` for a row that sees no key. A gradient that
    is given them (`meg.attention_grad ... stats`) need not recompute them;
    `meg-keep-attention-stats` asks for them where a gradient reads the
    output.

    ```mlir
    %o = meg.attention %q, %k, %v causal scale 0.125
        : tensor<2x2048x32x128xbf16>, tensor<2x2048x8x128xbf16>,
          tensor<2x2048x8x128xbf16>
    %o2, %lse = meg.attention %q, %k, %v causal scale 0.125 stats
        : tensor<2x2048x32x128xbf16>, tensor<2x2048x8x128xbf16>,
          tensor<2x2048x8x128xbf16>
    %o3 = meg.attention %q, %k, %v causal positions(%pos : tensor<1024xi32>)
        scale 0.125 : tensor<2x1024x32x128xbf16>, tensor<2x2048x8x128xbf16>,
          tensor<2x2048x8x128xbf16>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$query, Meg_FloatTensor:$key,
                       Meg_FloatTensor:$value,
                       Optional<RankedTensorOf<[I32]>>:$positions,
                       UnitAttr:$causal, F64Attr:$scale,
                       UnitAttr:$keep_stats);
  let results = (outs Meg_FloatTensor:$result,
                      Optional<RankedTensorOf<[F32]>>:$stats);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)?
    (`positions` `(` $positions^ `:` type($positions) `)`)? `scale` $scale
    (`stats` $keep_stats^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value)
  }];
}

def Meg_GeluOp : Meg_Op<"gelu", !listconcat([Meg_VJP, Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` exactly (`approximate none`, erf form) or with the tanh
    approximation (`approximate tanh`).

    ```mlir
    %y = meg.gelu %x approximate tanh : tensor<2x256x2048xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input,
                       Meg_GeluApproximationAttr:$approximate);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$input `approximate` `` $approximate attr-dict `:` type($input)";
}

def Meg_SiluOp : Meg_Op<"silu", !listconcat([Meg_VJP, Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Sigmoid linear unit";
  let description = [{
    `x * sigmoid(x)`.

    ```mlir
    %y = meg.silu %x : tensor<2x2048x11008xbf16>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Meg_SwigluOp : Meg_Op<"swiglu", !listconcat([Meg_VJP, Pure,
    SameOperandsAndResultType], Meg_ElementwiseTraits)> {
  let summary = "Gated SiLU: silu(gate) * up";
  let description = [{
    The gated activation of Llama's MLP, `silu(gate) * up`.

    ```mlir
    %y = meg.swiglu %gate, %up : tensor<2x2048x11008xbf16>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$gate, Meg_FloatTensor:$up);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}

def Meg_SoftmaxOp : Meg_Op<"softmax", [Meg_VJP, Meg_TP, Pure, Meg_RowReduction,
    SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis`, in f32.

    ```mlir
    %p = meg.softmax %s axis 3 : tensor<2x8x128x128xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Meg_CrossEntropyOp : Meg_Op<"cross_entropy", [Meg_VJP, Meg_TP, Pure,
    Meg_RowReduction]> {
  let summary = "Token cross-entropy of logits against labels";
  let description = [{
    `logits [..., V]`, `labels [...]` (integer class ids): the mean (or sum)
    over all tokens of `logsumexp(logits) - logits[label]`, in f32. Labels
    are not shifted. The result is an f32 scalar.

    With `ignore N`, a token whose label is `N` (`-100` in PyTorch and
    Hugging Face, for padding) adds nothing to the sum, and its logits get
    no gradient. Only `sum` takes an ignore index: the mean over the tokens
    that count is the sum divided by `meg.label_count`, which is what lets
    micro-batches and data-parallel ranks share one global count.

    ```mlir
    %l = meg.cross_entropy %logits, %labels mean
        : tensor<2x2048x32000xbf16>, tensor<2x2048xi32>
    %s = meg.cross_entropy %logits, %labels sum ignore -100
        : tensor<2x2048x32000xbf16>, tensor<2x2048xi32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$logits, Meg_IndexTensor:$labels,
                       Meg_ReduceKindAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Meg_ScalarF32:$result);
  let assemblyFormat = [{
    $logits `,` $labels `` $reduction (`ignore` $ignore_index^)? attr-dict `:`
    type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

def Meg_VocabShardStatsOp : Meg_Op<"vocab_shard_stats", [Meg_VJP, Pure,
    AllTypesMatch<["max", "sum_exp", "target", "mask"]>]> {
  let summary = "A vocab-parallel cross-entropy's per-token partial sums";
  let description = [{
    `logits [..., C]` are classes `[first, first + C)` of a vocabulary of
    `vocab` split over the tensor-parallel ranks; `max [...]` is the
    maximum logit of each token over every rank. Per token, in f32:
    `sum_exp = sum(exp(logits - max))` over this rank's classes, `target`
    the label's logit when the label is one of them (else 0), and `mask`
    1 when the label counts (not `ignore`), else 0. Summed over the ranks,
    `log(sum_exp) + max - target` is the token's cross-entropy, as
    Megatron's vocab-parallel cross-entropy computes it without gathering
    the logits. The gradient treats `max` as a constant (the loss does not
    depend on it) and `mask` as having none.

    ```mlir
    %s, %t, %m = meg.vocab_shard_stats %logits, %max, %labels, %first
        vocab 256 ignore -100
        : tensor<2x16x128xf32>, tensor<2x16xf32>, tensor<2x16xi32>, tensor<i32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$logits, RankedTensorOf<[F32]>:$max,
                       Meg_IndexTensor:$labels, Meg_ScalarI32:$first_class,
                       I64Attr:$vocab, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs RankedTensorOf<[F32]>:$sum_exp,
                      RankedTensorOf<[F32]>:$target,
                      RankedTensorOf<[F32]>:$mask);
  let assemblyFormat = [{
    $logits `,` $max `,` $labels `,` $first_class `vocab` $vocab
    (`ignore` $ignore_index^)? attr-dict `:` type($logits) `,` type($max) `,`
    type($labels) `,` type($first_class)
  }];
  let hasVerifier = 1;
}

def Meg_LabelCountOp : Meg_Op<"label_count", [Pure]> {
  let summary = "How many labels count toward a loss";
  let description = [{
    The number of elements of `labels` that differ from the ignore index, as
    an f32 scalar: the divisor of a token-mean loss whose cross-entropy
    ignores padding.

    `global` says the count stands for the whole training step: the loss
    divided by it, averaged over micro-batches and data-parallel ranks as
    meg-optimizer and meg-fsdp average, must be the sum over every token of
    the global batch divided by the global count (PyTorch's
    `cross_entropy(..., ignore_index=N)` over that batch). So meg-optimizer
    replaces a global count of a micro-batch by the mean count per
    micro-batch of the step's labels, and meg-fsdp by its mean over the
    data-parallel group. On one rank without micro-batches it is the count
    of `labels`.

    ```mlir
    %n = meg.label_count %labels ignore -100 global : tensor<2x2048xi32>
    %loss = meg.div %sum, %n : tensor<f32>
    ```
  }];
  let arguments = (ins Meg_IndexTensor:$labels, I64Attr:$ignore_index,
                       UnitAttr:$global);
  let results = (outs Meg_ScalarF32:$result);
  let assemblyFormat = [{
    $labels `ignore` $ignore_index (`global` $global^)? attr-dict `:`
    type($labels)
  }];
}

def Meg_ModulateOp : Meg_Op<"modulate", [Meg_VJP, Pure, Meg_Pointwise,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "adaLN modulation: x * (1 + scale) + shift";
  let description = [{
    The adaptive layer-norm modulation of DiT-style blocks (MMDiT, Flux):
    `input [B, S, H]`, `shift` and `scale` `[B, H]` broadcast over the
    sequence. The gate of a residual branch is an ordinary `meg.mul`.

    ```mlir
    %y = meg.modulate %x, %shift, %scale
        : tensor<2x256x512xf32>, tensor<2x512xf32>, tensor<2x512xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, Meg_FloatTensor:$shift,
                       Meg_FloatTensor:$scale);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $shift `,` $scale attr-dict `:` type($input) `,` type($shift)
    `,` type($scale)
  }];
  let hasVerifier = 1;
}

#endif // MEGC_DIALECT_MEG_IR_MEGNNOPS_TD

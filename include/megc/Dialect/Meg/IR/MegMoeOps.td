//===- MegMoeOps.td - mixture-of-experts routing and dispatch -*- tablegen -*-===//
//
// The ops of a DeepSeek-V3 mixture-of-experts layer with static shapes:
// the group-limited router, the assignment of routed tokens to the slots of
// each expert's fixed capacity, and the row gathers that move tokens into
// those slots and expert outputs back to the tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGMOEOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGMOEOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "megc/Dialect/Meg/IR/MegInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Meg_MoeRouteOp : Meg_Op<"moe_route", [Meg_VJP, Pure]> {
  let summary = "Group-limited top-k routing of DeepSeek-V3";
  let description = [{
    `scores [T, E]` are the router's sigmoid scores (f32) of `T` tokens over
    `E` experts and `bias [E]` the load-balancing correction, used for the
    selection only. With `s_b = scores + bias`, the experts fall into
    `groups` contiguous groups; a group's score is the sum of its two largest
    `s_b`, the `top_groups` best groups stay and the others' experts are
    excluded; each token then takes the `top_k` experts of largest `s_b`
    (ties to the lower index), listed from the best. `experts [T, top_k]`
    are their indices, `weights [T, top_k]` the unbiased scores of those
    experts, divided by their sum plus 1e-20 with `normalize`, times
    `scaling`. The gradient reaches `scores` through the weights; the
    selection and `bias` get none.

    ```mlir
    %e, %w = meg.moe_route %s, %b top_k 2 groups 2 top_groups 1 normalize
        scaling 2.5 : tensor<32x8xf32>, tensor<8xf32>
        -> tensor<32x2xi32>, tensor<32x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$scores,
                       RankedTensorOf<[F32]>:$bias, I64Attr:$top_k,
                       I64Attr:$groups, I64Attr:$top_groups,
                       UnitAttr:$normalize, F64Attr:$scaling);
  let results = (outs RankedTensorOf<[I32]>:$experts,
                      RankedTensorOf<[F32]>:$weights);
  let assemblyFormat = [{
    $scores `,` $bias `top_k` $top_k `groups` $groups `top_groups` $top_groups
    (`normalize` $normalize^)? `scaling` $scaling attr-dict `:` type($scores)
    `,` type($bias) `->` type($experts) `,` type($weights)
  }];
  let hasVerifier = 1;
}

def Meg_MoeRouteGradOp : Meg_Op<"moe_route_grad", [Pure]> {
  let summary = "Gradient of meg.moe_route's weights with respect to the scores";
  let description = [{
    `result [T, E]` is zero except at each token's chosen experts, where it
    is the gradient through `weights = scaling * s / (sum s + 1e-20)` (with
    `normalize`; `scaling * s` without) of `weights_grad [T, top_k]`.

    ```mlir
    %ds = meg.moe_route_grad %dw, %s, %e normalize scaling 2.5
        : tensor<32x2xf32>, tensor<32x8xf32>, tensor<32x2xi32>
        -> tensor<32x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$weights_grad,
                       RankedTensorOf<[F32]>:$scores,
                       RankedTensorOf<[I32]>:$experts, UnitAttr:$normalize,
                       F64Attr:$scaling);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $weights_grad `,` $scores `,` $experts (`normalize` $normalize^)?
    `scaling` $scaling attr-dict `:` type($weights_grad) `,` type($scores) `,`
    type($experts) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Meg_MoeAssignOp : Meg_Op<"moe_assign", [Pure]> {
  let summary = "Places routed tokens in the slots of each expert's capacity";
  let description = [{
    Each of the `T x top_k` choices in `experts [T, top_k]` (with its weight
    in `weights`) asks for a slot of its expert, which has `capacity` of
    them. An expert asked by more choices keeps, by `policy`, those of the
    largest weight (`probs`, ties to the earlier token) or of the earliest
    tokens (`position`), in that order in its slots; the others are dropped
    (their weights are not renormalised). Results, all i32:
    `slot_tokens [E, capacity]` the token in each slot (-1 when empty),
    `slot_choices [E, capacity]` its choice `t * top_k + j` (-1), `positions
    [T, top_k]` each choice's slot `e * capacity + c` (-1 when dropped),
    `load [E]` the choices each expert was asked by, `dropped` how many
    choices were dropped. With `capacity >= T` nothing is dropped.

    ```mlir
    %tok, %choice, %pos, %load, %dropped = meg.moe_assign %e, %w experts 8
        capacity 8 policy probs : tensor<32x2xi32>, tensor<32x2xf32>
        -> tensor<8x8xi32>, tensor<8x8xi32>, tensor<32x2xi32>, tensor<8xi32>,
           tensor<i32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$experts,
                       RankedTensorOf<[F32]>:$weights, I64Attr:$num_experts,
                       I64Attr:$capacity, Meg_DropPolicyAttr:$policy);
  let results = (outs RankedTensorOf<[I32]>:$slot_tokens,
                      RankedTensorOf<[I32]>:$slot_choices,
                      RankedTensorOf<[I32]>:$positions,
                      RankedTensorOf<[I32]>:$load, Meg_ScalarI32:$dropped);
  let assemblyFormat = [{
    $experts `,` $weights `experts` $num_experts `capacity` $capacity
    `policy` `` $policy attr-dict `:` type($experts) `,` type($weights) `->`
    type($slot_tokens) `,` type($slot_choices) `,` type($positions) `,`
    type($load) `,` type($dropped)
  }];
  let hasVerifier = 1;
}

def Meg_GatherRowsOp : Meg_Op<"gather_rows", [Meg_VJP, Pure]> {
  let summary = "Rows of a matrix picked by an index tensor";
  let description = [{
    `result[i..., :] = source[index[i...], :]` for `source [N, H]`, with a
    zero row where the index is outside `[0, N)` (-1: an empty slot, a
    dropped token). The gradient with respect to `source` sums the result
    rows that read each source row; it needs `inverse [N, m]`, which lists
    for each source row the (flat) result rows that read it, -1 padded:
    the matching `meg.moe_assign` gives both directions. The index gets no
    gradient.

    ```mlir
    %x_e = meg.gather_rows %x, %slot_tokens inverse %positions
        : tensor<32x64xf32>, tensor<8x8xi32>, tensor<32x2xi32>
        -> tensor<8x8x64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$source, RankedTensorOf<[I32]>:$index,
                       Optional<RankedTensorOf<[I32]>>:$inverse);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $source `,` $index (`inverse` $inverse^)? attr-dict `:` type($source) `,`
    type($index) (`,` type($inverse)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Meg_ExpertBiasUpdateOp : Meg_Op<"expert_bias_update", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<Meg_ResourceParams>]>]> {
  let summary = "DeepSeek-V3's load-balancing bias update after a training step";
  let description = [{
    After a training step, the frozen f32 routing bias `bias` [E] (a
    router's `e_score_correction_bias`) becomes
    `bias + rate * sign(mean(L) - L)`, `L` being `load` [E] (the choices
    routed to each expert, counts in f32) summed over the step's
    micro-batches and data-parallel ranks: an expert chosen more often
    than the mean loses `rate`, one chosen less often gains it, and one at
    the mean keeps its bias. meg-optimizer carries this out in the training
    step (after the updates, as DeepSeek-V3 trains without an auxiliary
    loss) and drops it from every other function: forward, loss and grad
    runs leave the bias as it is.

    ```mlir
    meg.expert_bias_update @model.layers.1.mlp.gate.e_score_correction_bias,
        %load rate 1.0e-3 : tensor<8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$bias, RankedTensorOf<[F32]>:$load,
                       F64Attr:$rate);
  let assemblyFormat = "$bias `,` $load `rate` $rate attr-dict `:` type($load)";
  let hasVerifier = 1;
}

def Meg_DataSumOp : Meg_Op<"data_sum", [Pure, SameOperandsAndResultType]> {
  let summary = "The sum of a per-rank value over the data-parallel ranks";
  let description = [{
    The sum of `input` over every rank that computes on its own part of the
    global batch: meg-fsdp makes it an all-reduce (sum) over the
    data-parallel group; on one rank it is `input`. Statistics of the whole
    batch (the per-expert load of a training step) are taken this way.

    ```mlir
    %total = meg.data_sum %load : tensor<8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

#endif // MEGC_DIALECT_MEG_IR_MEGMOEOPS_TD

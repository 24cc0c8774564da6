//===- MegCollectiveOps.td - collectives over submeshes ----*- tablegen -*-===//
//
// all_gather, reduce_scatter and all_reduce over a registered group of mesh
// axes, in blocking form and as start/wait pairs for overlap.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGCOLLECTIVEOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGCOLLECTIVEOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "megc/Dialect/Meg/IR/MegInterfaces.td"
include "megc/Dialect/Meg/IR/MegTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Collectives are ordered with respect to each other: every rank must issue
// them in the same order, so they read and write a shared resource.
def Meg_CommResource : Resource<"::mlir::meg::CommResource">;

// `overridden`: the interface's methods with defaults that the op defines
// (a blocking collective with a started form: hasStartedForm, buildStart).
class Meg_CollectiveOp<string mnemonic, list<Trait> traits = [],
                       list<string> overridden = []>
    : Meg_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<Meg_CollectiveOpInterface, overridden>,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        MemoryEffects<[MemRead<Meg_CommResource>,
                       MemWrite<Meg_CommResource>]>])> {
}

class Meg_GatherLikeDoc<string what, string example> {
  string text = [{
    }] # what # [{ The group is named by mesh axes, e.g. `@world[dp_shard]`;
    it must be registered with `meg.submesh`, otherwise the verifier names
    the group and the registered ones. Along `dim` the result is the input
    extent times the group size (gather) or divided by it (scatter).

    ```mlir
    }] # example # [{
    ```
  }];
}

def Meg_AllGatherOp : Meg_CollectiveOp<"all_gather", [Meg_VJP],
    ["hasStartedForm", "buildStart"]> {
  let summary = "Gathers the shards of every rank of a group";
  let description = Meg_GatherLikeDoc<
      "Concatenates, along `dim` and in rank order, the input of every rank. "
      "In a model (sequence parallelism gathering a sequence's shards), the "
      "ranks go on with the same value, so each holds the whole gradient of "
      "it: the gradient of a rank's shard is its piece (`meg.shard_slice`).",
      "%full = meg.all_gather %shard over @world[dp_shard] dim 0\n"
      "        : tensor<256x64xbf16> -> tensor<1024x64xbf16>">.text;
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `dim` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Meg_ReduceScatterOp : Meg_CollectiveOp<"reduce_scatter", [Meg_VJP],
    ["hasStartedForm", "buildStart"]> {
  let summary = "Reduces across a group and keeps this rank's shard";
  let description = Meg_GatherLikeDoc<
      "Reduces the inputs of the group elementwise (`sum` or `avg`) and "
      "returns the rank's contiguous piece along `dim`. In a model (a "
      "row-parallel layer's partial products summed into sequence shards), "
      "the gradient of every rank's input is the whole gradient of the sum: "
      "the all-gather of the pieces' gradients (for `sum`).",
      "%g = meg.reduce_scatter %grad over @world[dp_shard] dim 0 avg\n"
      "        : tensor<1024x64xf32> -> tensor<256x64xf32>">.text;
  let arguments = (ins Meg_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       Meg_CollectiveReduceAttr:$reduce);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `dim` $dim `` $reduce attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Meg_AllReduceOp : Meg_CollectiveOp<"all_reduce",
    [AllTypesMatch<["input", "result"]>, Meg_VJP],
    ["hasStartedForm", "buildStart"]> {
  let summary = "Reduces across a group; every rank gets the result";
  let description = [{
    Elementwise `sum` or `avg` over the ranks of a registered group.

    In a model (a row-parallel layer's output summed over `tp`), the
    gradient of a `sum` passes through unchanged, as Megatron's
    reduce-from-tensor-parallel region: the ranks go on with the same
    value, so each one's gradient of it is the whole gradient.

    ```mlir
    %g = meg.all_reduce %grad over @world[dp_outer] avg : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Meg_CollectiveReduceAttr:$reduce);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `` $reduce attr-dict `:`
    type($input)
  }];
}

def Meg_AllToAllOp : Meg_CollectiveOp<"all_to_all",
    [AllTypesMatch<["input", "result"]>, Meg_VJP],
    ["hasStartedForm", "buildStart"]> {
  let summary = "Exchanges pieces between every pair of ranks of a group";
  let description = [{
    Splits dim 0 of the input into one contiguous piece per rank of the
    group: piece `i` goes to rank `i`, and the result's piece `i` is what
    rank `i` sent to this one (expert parallelism dispatching tokens to the
    ranks that hold their experts, and combining them back). Dim 0 must be
    a multiple of the group size. Applied twice it gives the input back,
    so its gradient is the all-to-all of the result's gradient. The group
    must be registered with `meg.submesh`.

    ```mlir
    %mine = meg.all_to_all %slots over @world[dp_shard] : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) attr-dict `:` type($input)
  }];
}

def Meg_ShiftOp : Meg_CollectiveOp<"shift",
    [AllTypesMatch<["input", "result"]>, Meg_VJP],
    ["hasStartedForm", "buildStart"]> {
  let summary = "Passes each rank's input to the rank `offset` places on";
  let description = [{
    A cyclic shift along a registered group: the result on the rank at
    index `i` of the group is the input of the rank at index
    `(i - offset) mod size`, so every rank sends its input `offset` places
    on and receives from `offset` places back. A ring passes key and value
    blocks on with it (context parallelism), and neighbouring pipeline
    stages hand activations on. The gradient of the input is the shift of
    the result's gradient by `-offset`: each gradient goes back to the rank
    its value came from.

    ```mlir
    %next = meg.shift %kv over @world[cp] by 1 : tensor<2x128x64xbf16>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$offset);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `by` $offset attr-dict `:`
    type($input)
  }];
}

// Attention over a context-parallel group whose keys and values go around
// the ring of its ranks; `meg-ring-attention` expands both ops into the
// ring's shifts and block attentions once autodiff has paired them.
class Meg_RingAttentionBase<string mnemonic, list<Trait> traits = []>
    : Meg_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        MemoryEffects<[MemRead<Meg_CommResource>,
                       MemWrite<Meg_CommResource>]>])> {
}

def Meg_RingAttentionOp : Meg_RingAttentionBase<"ring_attention",
    [Meg_VJP, Meg_TP, InferTypeOpAdaptor]> {
  let summary = "Causal attention of a context-parallel group, by a ring";
  let description = [{
    Causal attention (`meg.attention`'s, in the bshd layout) of a sequence
    split over the ranks of a group of C ranks, each holding two of its 2C
    chunks: rank i holds chunks i and 2C - 1 - i (causal load balancing),
    so `q`, `k` and `v` are a rank's two chunks, `[B, 2L, H, D]`. The
    result is this rank's queries' attention against the keys of the
    whole sequence.

    It is computed in C steps: step 0 attends to the rank's own keys
    (causally), and step s to those of the rank s places back, passed on
    by `meg.shift` while the previous block is worked on; a block's partial
    result joins the running one by their log-sum-exp statistics. A block
    of an earlier rank is seen whole by both query chunks through its
    first chunk only, one of a later rank by the second query chunk only,
    so each step after the first costs half of the first. The gradient
    (`meg.ring_attention_grad`) passes the blocks around again, the
    gradients of their keys and values gathering on the way back to their
    ranks.

    ```mlir
    %o = meg.ring_attention %q, %k, %v over @world[cp] scale 0.125
        : tensor<2x1024x32x128xbf16>, tensor<2x1024x8x128xbf16>,
          tensor<2x1024x8x128xbf16>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$query, Meg_FloatTensor:$key,
                       Meg_FloatTensor:$value, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, F64Attr:$scale);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `over` $mesh `` custom<AxisList>($axes)
    `scale` $scale attr-dict `:` type($query) `,` type($key) `,` type($value)
  }];
}

def Meg_RingAttentionGradOp : Meg_RingAttentionBase<"ring_attention_grad", [
    AllTypesMatch<["grad", "output"]>, AllTypesMatch<["query", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>, AllTypesMatch<["value", "value_grad"]>]> {
  let summary = "Gradients of `meg.ring_attention` with respect to q, k, v";
  let description = [{
    The gradients of this rank's queries, keys and values, given the
    output gradient and the forward's output: the key and value blocks go
    around the ring again, and each block's gradients gather from the rank
    after its own around to its own.

    ```mlir
    %dq, %dk, %dv = meg.ring_attention_grad %do, %q, %k, %v, %o
        over @world[cp] scale 0.125
        : tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>,
          tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$grad, Meg_FloatTensor:$query,
                       Meg_FloatTensor:$key, Meg_FloatTensor:$value,
                       Meg_FloatTensor:$output, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, F64Attr:$scale);
  let results = (outs Meg_FloatTensor:$query_grad, Meg_FloatTensor:$key_grad,
                      Meg_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $output `over` $mesh ``
    custom<AxisList>($axes) `scale` $scale attr-dict `:` type($grad) `,`
    type($query) `,` type($key) `,` type($value)
  }];
}

def Meg_CopyToGroupOp : Meg_Op<"copy_to_group", [Pure, Meg_VJP,
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Identity whose gradient is summed over a group";
  let description = [{
    Megatron's copy-to-tensor-parallel region: the value (the same on every
    rank of the group) passes through, and meg-autodiff turns its gradient
    into a `meg.all_reduce ... sum` over the group, since each rank's
    column-parallel layer contributes only part of it. meg-autodiff
    replaces it by its input once the gradients are built (the program
    lowering forwards the input of any left, in an inference build).

    ```mlir
    %x = meg.copy_to_group %h over @world[tp] : tensor<2x256x512xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) attr-dict `:` type($input)
  }];
}

def Meg_ShardSliceOp : Meg_CollectiveOp<"shard_slice", [Meg_VJP]> {
  let summary = "Takes this rank's piece of a replicated tensor";
  let description = Meg_GatherLikeDoc<
      "Splits the input along `dim` into one contiguous piece per rank of the "
      "group and returns the piece of this rank's index in the group, without "
      "communicating (the input is the same on every rank). meg-fsdp uses it "
      "to give the optimizer its shard of replicated weights and gradients; "
      "sequence parallelism to split a sequence into its shards, whose "
      "gradients the replicated input gathers (`meg.all_gather`). "
      "Canonicalization turns the piece of a sum over the group "
      "(`all_reduce sum`, possibly transposed) into a `reduce_scatter`, which "
      "sends half the bytes.",
      "%piece = meg.shard_slice %grad over @world[dp_shard] dim 0\n"
      "        : tensor<1024xf32> -> tensor<256xf32>">.text;
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `dim` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasCanonicalizer = 1;
}

def Meg_AllGatherStartOp : Meg_CollectiveOp<"all_gather_start"> {
  let summary = "Starts an all_gather; meg.wait yields its result";
  let description = [{
    The asynchronous form of `meg.all_gather`, used to prefetch the next
    unit's parameters while the current one computes.

    ```mlir
    %f = meg.all_gather_start %shard over @world[dp_shard] dim 0
        : tensor<256x64xbf16> -> !meg.future<tensor<1024x64xbf16>>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `dim` $dim attr-dict `:`
    type($input) `->` qualified(type($future))
  }];
}

def Meg_ReduceScatterStartOp : Meg_CollectiveOp<"reduce_scatter_start"> {
  let summary = "Starts a reduce_scatter; meg.wait yields its result";
  let description = [{
    The asynchronous form of `meg.reduce_scatter`, used to reduce a gradient
    bucket while backward continues.

    ```mlir
    %f = meg.reduce_scatter_start %g over @world[dp_shard] dim 0 sum
        : tensor<1024x64xf32> -> !meg.future<tensor<256x64xf32>>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       Meg_CollectiveReduceAttr:$reduce);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `dim` $dim `` $reduce attr-dict
    `:` type($input) `->` qualified(type($future))
  }];
}

def Meg_AllReduceStartOp : Meg_CollectiveOp<"all_reduce_start"> {
  let summary = "Starts an all_reduce; meg.wait yields its result";
  let description = [{
    The asynchronous form of `meg.all_reduce`: meg-fsdp's gradient buckets
    under HSDP, and meg-async-collectives for an all-reduce with work to
    overlap (a tensor-parallel input gradient and the weight gradient).

    ```mlir
    %f = meg.all_reduce_start %g over @world[dp_outer] avg
        : tensor<256x64xf32> -> !meg.future<tensor<256x64xf32>>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Meg_CollectiveReduceAttr:$reduce);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `` $reduce attr-dict `:`
    type($input) `->` qualified(type($future))
  }];
}

def Meg_AllToAllStartOp : Meg_CollectiveOp<"all_to_all_start"> {
  let summary = "Starts an all_to_all; meg.wait yields its result";
  let description = [{
    The asynchronous form of `meg.all_to_all` (meg-async-collectives makes
    it), so that work independent of the exchange runs while it moves.

    ```mlir
    %f = meg.all_to_all_start %slots over @world[ep]
        : tensor<8x16x64xf32> -> !meg.future<tensor<8x16x64xf32>>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) attr-dict `:`
    type($input) `->` qualified(type($future))
  }];
}

def Meg_ShiftStartOp : Meg_CollectiveOp<"shift_start"> {
  let summary = "Starts a shift; meg.wait yields its result";
  let description = [{
    The asynchronous form of `meg.shift` (meg-async-collectives makes it):
    a ring's next key and value block moves while the current one is
    attended to.

    ```mlir
    %f = meg.shift_start %kv over @world[cp] by 1
        : tensor<2x128x64xbf16> -> !meg.future<tensor<2x128x64xbf16>>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$offset);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `by` $offset attr-dict `:`
    type($input) `->` qualified(type($future))
  }];
}

def Meg_SendStartOp : Meg_CollectiveOp<"send_start"> {
  let summary = "Starts sending a tensor to one rank of a group";
  let description = [{
    One side of a point-to-point transfer (pipeline stages hand their
    activations on and their gradients back): the input goes to the rank
    at index `peer` of the group, whose matching `meg.recv_start` receives
    it. Transfers between two ranks of a group arrive in the order they
    were sent. `meg.wait` on the future completes the send (its result is
    the input, which stays unchanged until then); a per-rank program made
    by `meg-pipeline-split` holds it.

    The sends and receives of one `batch` (those a pipeline rank issues
    between two passes) start together, once the last of them is reached,
    as one exchange: a send may be held until its receive is posted (as
    NCCL's may), and issued one by one, two neighbours that each send
    before receiving would wait on each other. Every wait for a batch's
    transfer follows the batch's last transfer.

    ```mlir
    %f = meg.send_start %h over @world[pp] to 1 in batch 3
        : tensor<2x128x512xf32> -> !meg.future<tensor<2x128x512xf32>>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$peer,
                       OptionalAttr<I64Attr>:$batch);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    $input `over` $mesh `` custom<AxisList>($axes) `to` $peer
    (`in` `batch` $batch^)? attr-dict `:`
    type($input) `->` qualified(type($future))
  }];
}

def Meg_RecvStartOp : Meg_CollectiveOp<"recv_start"> {
  let summary = "Starts receiving a tensor from one rank of a group";
  let description = [{
    The other side of `meg.send_start`: `meg.wait` on the future yields
    the tensor the rank at index `peer` of the group sent. A `batch` starts
    together with the sends and receives of the same batch (see
    `meg.send_start`).

    ```mlir
    %f = meg.recv_start over @world[pp] from 0 in batch 3
        : !meg.future<tensor<2x128x512xf32>>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$peer, OptionalAttr<I64Attr>:$batch);
  let results = (outs Meg_FutureType:$future);
  let assemblyFormat = [{
    `over` $mesh `` custom<AxisList>($axes) `from` $peer
    (`in` `batch` $batch^)? attr-dict `:` qualified(type($future))
  }];
}

def Meg_WaitOp : Meg_Op<"wait", [InferTypeOpAdaptor,
    MemoryEffects<[MemRead<Meg_CommResource>, MemWrite<Meg_CommResource>]>]> {
  let summary = "Waits for an asynchronous collective and yields its tensor";
  let description = [{
    ```mlir
    %full = meg.wait %f : !meg.future<tensor<1024x64xbf16>>
    ```
  }];
  let arguments = (ins Meg_FutureType:$future);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
}

#endif // MEGC_DIALECT_MEG_IR_MEGCOLLECTIVEOPS_TD

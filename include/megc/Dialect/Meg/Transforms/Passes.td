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
      meg.hf_config: LlamaForCausalLM (Hugging Face config)
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

def MegFuseRope : Pass<"meg-fuse-rope", "::mlir::func::FuncOp"> {
  let summary = "Replaces unfused rotary position embeddings by meg.rope";
  let description = [{
    Recognises `x * cos + rotate_half(x) * sin` on the first `rotary_dim`
    channels of a rank-4 activation, with the pass-through tail re-joined by
    a concat when `rotary_dim` is smaller than the head dim, and replaces it
    with one `meg.rope` (so that autodiff then uses `meg.rope_grad`, the
    exact transpose). Matched forms:

    - rotate_half half-split (`concat(-x2, x1)` of the two halves) or
      interleaved (`[-x1, x0, -x3, x2, ...]`, written as strided slices
      stacked on a new last axis and reshaped back);
    - negation as `meg.neg`, a multiply by -1 or a subtraction from 0;
      operands of `add` and `mul` in either order;
    - tables broadcast as `[1, S, 1, R]` (layout bshd) or `[S, 1, 1, R]`
      (sbhd); a table reshaped from `[S, R]`, sliced from a longer table, or
      rounded from f32 to the activation dtype is traced back, so the fused
      op reads the longer f32 table and rounds once. Tables may be computed
      in the graph or be function arguments, and q and k may share them.

    Because `meg.rope` takes the tables as operands, a scaled table (mscale)
    is fused exactly. Left alone, with a remark when `remarks` is set and a
    count in the pass statistics: the inverse rotation (`concat(x2, -x1)`),
    tables of another shape than the two layouts, and a rotated part that is
    used without its tail.

    ```mlir
    // before (half-split, full rotary dim 16)
    %x1 = meg.slice %x [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1] : ...
    %x2 = meg.slice %x [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1] : ...
    %n = meg.neg %x2 : tensor<2x8x4x8xf32>
    %r = meg.concat %n, %x1 axis 3 : ...
    %a = meg.mul %x, %cos : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
    %b = meg.mul %r, %sin : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>
    %y = meg.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
    // after
    %y = meg.rope %x, %cos2d, %sin2d layout bshd
        : tensor<2x8x4x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark on each near-match saying why it was not fused">
  ];
  let statistics = [
    Statistic<"numFused", "fused", "RoPE computations replaced by meg.rope">,
    Statistic<"numInverse", "inverse-rotation",
              "Left alone: inverse rotation concat(x2, -x1)">,
    Statistic<"numLayout", "unsupported-table-shape",
              "Left alone: cos/sin not broadcast as [1,S,1,R] or [S,1,1,R]">,
    Statistic<"numNoTail", "rotary-part-without-tail",
              "Left alone: partial rotation not re-joined with its tail">
  ];
}

def MegFuse : Pass<"meg-fuse", "::mlir::func::FuncOp"> {
  let summary = "Groups elementwise and row-reduction work into fusion regions";
  let description = [{
    Producer-consumer fusion: starting from the last op of each chain, pulls
    elementwise producers (arithmetic, activations and their gradients,
    casts, modulate) into a `meg.fusion` region when every use of the
    producer is inside the region, so no intermediate is written out. A
    region holds at most one row reduction (rms_norm, layer_norm, softmax,
    cross-entropy), which thereby absorbs the residual add or the casts
    before it and the elementwise work after it. Then horizontal fusion
    joins independent elementwise work over one shape (lone ops or regions
    without a row reduction, none reading the other) into one region with
    several results. A cross-entropy and its gradient on the same logits
    and labels (the gradient not reading the loss; not a loss over chunks
    of tokens, whose gradient recomputes the chunk's logits) become one
    region where the gradient stands, so that one kernel computes the row
    statistics once for both; pure work between them that reads the loss
    moves after it. Each region becomes one kernel, named after the ops it
    holds; matrix products, data movement and collectives stay outside.
    Constants are cloned into the region.

    ```mlir
    // before
    %h = meg.add %x, %r : tensor<2x16x64xf32>, tensor<2x16x64xf32>
    %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
    // after
    %n = meg.fusion (%x, %r, %w) : (tensor<2x16x64xf32>, tensor<2x16x64xf32>,
        tensor<64xf32>) -> tensor<2x16x64xf32> {
    ^bb0(%a: tensor<2x16x64xf32>, %b: tensor<2x16x64xf32>, %c: tensor<64xf32>):
      %0 = meg.add %a, %b : tensor<2x16x64xf32>, tensor<2x16x64xf32>
      %1 = meg.rms_norm %0, %c eps 1.0e-05 : tensor<2x16x64xf32>, tensor<64xf32>
      meg.yield %1 : tensor<2x16x64xf32>
    }
    ```
  }];
}

def MegOutlineCudaGraphs : Pass<"meg-outline-cuda-graphs", "::mlir::ModuleOp"> {
  let summary = "Outlines capturable work into meg.graph_region ops";
  let description = [{
    Wraps runs of work that a CUDA graph can capture (static shapes, no host
    synchronisation, no host-side work) into `meg.graph_region` ops, which
    the runtime captures on the first execution and replays afterwards. With
    `scope=step` each maximal capturable run of a public function becomes
    one region named `<function>.step` (numbered when a non-capturable op
    splits it); with `scope=layer` each transformer layer's work does, named
    `layers.<N>.forward`, `.backward`, `.optimizer` in the order the layer's
    runs appear (an op belongs to the layer its builder recorded on the
    parameters it reads, `meg.layer = N` on their `meg.param`, never to one
    read from their names; ops reading no parameter belong with the op
    before them), and the remaining work runs outside graphs as in the
    reference systems.

    `share-io-buffers` marks a layer region `share_io` when it is chained:
    it has one result, and one of its inputs is the single result of the
    previous region of the same kind; the static memory plan then gives both
    one buffer, so no copy happens between the graphs. A multi-output layer
    (MMDiT) is graphed without chaining. A layer with no trainable parameter
    and no backward of its own (nothing trainable before it needs gradients
    through it) gets `forward_only` in a function that runs a backward.
    Blocking collectives are captured only with `capture-collectives` (the
    CUDA runtime enqueues NCCL's collectives into the graph); a started
    collective and its wait never are, since they may fall in different
    regions (meg-async-collectives runs after this pass and keeps the pairs
    it makes inside one region). An op that is not captured gets a remark
    (with `remarks`) naming it and the reason.

    ```mlir
    // scope=layer share-io-buffers
    %h1 = meg.graph_region "layers.0.forward" share_io (%h0, %cos, %sin)
        : (...) -> tensor<2x16x64xf32> { ... }
    %h2 = meg.graph_region "layers.1.forward" share_io (%h1, %cos, %sin)
        : (...) -> tensor<2x16x64xf32> { ... }
    ```
  }];
  let options = [
    Option<"scope", "scope", "std::string", /*default=*/"\"step\"",
           "What one graph covers: step or layer">,
    Option<"shareIoBuffers", "share-io-buffers", "bool", /*default=*/"false",
           "Chain single-input/single-output layer graphs">,
    Option<"captureCollectives", "capture-collectives", "bool",
           /*default=*/"false", "Capture collectives inside graphs">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for each op left outside graphs, with the reason">
  ];
}

def MegAutodiff : Pass<"meg-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    Adds a function (`name`, default `grad`) with the arguments of the loss
    function (`function`, default `loss`, which must return one scalar)
    that returns the loss and the gradient of the loss with respect to every
    trainable parameter, named `grad.<parameter>` and in declaration order;
    each gradient result records its parameter (`meg.grad_of = @p`), which
    later passes read instead of the name. The loss is computed as before; the gradients are built in reverse op
    order from each op's vector-Jacobian product (the
    `DifferentiableOpInterface`), summing where a value has several uses.
    Frozen parameters get no gradient output, so canonicalization removes
    their weight-gradient work. Calls must be inlined first; an op on the
    path to the loss without a vector-Jacobian product is an error naming
    it. Every `meg.copy_to_group` of the module, whose meaning was its
    gradient's all-reduce, is then replaced by its input.

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
        tensor<4x4xf32> {meg.grad_of = @w, meg.name = "grad.w"}) {
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
    built by meg-autodiff (`gradient`, default `grad`): every gradient
    result (`meg.grad_of`), produced in the compute dtype, is cast to
    `main_grads` where (and only where) the two differ, so that the
    optimizer consumes gradients in the dtype the policy names. A gradient
    that is a sum over a mesh group (the gradient of a parameter every
    tensor-parallel rank applies to its own part: norm weights under
    sequence parallelism, per-head norms) is summed in `grad_reduce`: its
    partials are cast before the `meg.all_reduce`, as Megatron reduces such
    gradients in its main-gradient buffers. Without a
    policy the pass changes nothing. A policy that cannot hold (master
    weights `main_params` that cannot represent a parameter exactly: other
    than its dtype and not f32) is an error naming the parameter; the
    AdamW verifier rejects an update whose parameter, gradient or moments
    disagree with the policy.

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
    scalar counting steps, exact up to 2^24). When the policy keeps main
    parameters in another dtype than a weight (bf16 weights, f32 master
    weights), the update works on the state `optimizer.main_param.<p>`
    (initialised as `#meg.init<copy(@p)>`) and the weight is stored as its
    rounding. Gradients are the results marked `meg.grad_of`, and each state
    parameter records whose state it is (`meg.state_of =
    #meg.state_of<exp_avg of @p>`, `exp_avg_sq`, `main_param`), which
    meg-fsdp reads. Parameters and state are written with `meg.param_store` after
    all reads.

    With `meg.micro_batches = N`, `train_step` takes inputs N times the
    gradient function's batch (dim 0), runs the gradient on each slice of
    rows in turn and steps on the mean of the N losses and gradients (summed
    in the gradients' dtype); the activations of one micro-batch are alive
    at a time. A `meg.label_count ... global` of a micro-batch's labels
    becomes the step's count divided by N, so that a loss ignoring padding
    is the sum over the step's tokens divided by the step's count. With a `meg.lr_schedule` the rate is the state scalar
    `optimizer.lr`, which the runtime writes before each step (recorded on
    the schedule as `lr_param`, with `step_param`). With `clip_grad` > 0 in
    `meg.optimizer`, every update scales its gradient by `min(1, clip /
    (norm + 1e-6))`, norm being the f32 L2 norm of all gradients, and
    `train_step` also returns the norm as `grad_norm`.

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

def MegAsyncCollectives : Pass<"meg-async-collectives", "::mlir::func::FuncOp"> {
  let summary = "Overlaps each collective with the work that does not need it";
  let description = [{
    Replaces a blocking `meg.all_reduce`, `meg.all_gather`,
    `meg.reduce_scatter`, `meg.all_to_all` or `meg.shift` by its `_start`
    form, issued
    as soon as its input is computed (but after every op before it that
    writes: other collectives and waits keep their order on every rank),
    and `meg.wait`, right before the first op of its block that reads the
    result (before the terminator when none does). The ops in between,
    which do not read the collective's result, run while it moves. An
    input that only the collective reads and that computes without side
    effects (a sum of gradient contributions) first moves up to right after
    its own inputs (up to three levels of such ops), never above an op with
    effects. A collective with nothing to overlap stays blocking, and so does an
    all-gather whose result is stored into a parameter (the program lowering
    gathers it straight into the parameter's storage). Values are
    unchanged.

    What overlaps, as in Megatron and DeepSeek-V3:
    - tensor parallelism: in the backward, the all-reduce over `tp` of a
      column-parallel layer's input gradient (or its reduce-scatter, with
      sequence parallelism) runs while the layer's weight gradient is
      computed;
    - expert parallelism: an MoE layer computes its shared experts between
      the dispatch's start and its wait, and in the backward the shared
      experts' gradient between the exchange of the slots' gradient and its
      wait;
    - context parallelism by a ring: the next key and value block moves
      while the current one is attended to, and in the backward the blocks
      move again while the layer's MLP gradient is computed.

    ```mlir
    // before
    %dx = meg.matmul %dy, %w ...
    %sum = meg.all_reduce %dx over @world[tp] sum : tensor<64x32xf32>
    %dw = meg.matmul %dy, %x transpose_lhs ...
    %next = meg.add %sum, %r ...
    // after
    %dx = meg.matmul %dy, %w ...
    %f = meg.all_reduce_start %dx over @world[tp] sum
        : tensor<64x32xf32> -> !meg.future<tensor<64x32xf32>>
    %dw = meg.matmul %dy, %x transpose_lhs ...
    %sum = meg.wait %f : !meg.future<tensor<64x32xf32>>
    %next = meg.add %sum, %r ...
    ```

    In a pipeline rank's program (`meg.pipeline_rank`), waits and parameter
    stores do not hold a start back (they neither communicate nor write its
    input): the sums of the loss and the non-finite count after the passes
    start at the rank's last transfer, so that a stage whose updates wait
    for them does not wait for the other stages' weight-gradient passes and
    updates. And each batch of transfers that sends (the
    `meg.send_start`s and `meg.recv_start`s between two passes) starts as
    soon as the values it sends exist: the ops before it that those values
    do not need (the weight gradients of a backward pass, the last stage's
    updates and their stores) move after it, in their order; nothing moves
    past a wait, another transfer or a collective (option `early-transfers`,
    on by default; `megc --no-early-sends` turns it off for the textbook
    order, in which a pass sends after all its work).

    The statistic `overlapped` counts the collectives it splits,
    `transfers` the batches of transfers it starts earlier.
  }];
  let options = [
    Option<"earlyTransfers", "early-transfers", "bool", /*default=*/"true",
           "In a pipeline rank's program, start each batch of transfers "
           "that sends as soon as the sent values exist">
  ];
  let statistics = [
    Statistic<"overlapped", "overlapped",
              "Collectives with work between their start and wait">,
    Statistic<"transfersHoisted", "transfers",
              "Batches of pipeline transfers started earlier">
  ];
}

def MegScheduleUpdates : Pass<"meg-schedule-updates", "::mlir::func::FuncOp"> {
  let summary = "Moves each parameter update to just after its last input";
  let description = [{
    meg-optimizer appends every update after the whole backward pass, so each
    gradient lives until the end of the step (and meg-precision casts the
    gradients `grad` returns at its end). This pass moves every op whose
    result a `meg.param_store` writes (`meg.adamw`, the rounding of a master
    weight to the model's dtype, the step count), or that the function
    returns and nothing else reads (a result computed in its output
    buffer), right after the last op it must follow: the producers of its operands, and every other read of the
    parameter it overwrites (through views and the collectives that start
    from a read). The ops that only the update needs move with it: the cast
    of its gradient to the `main_grads` dtype, the sum over micro-batches,
    the reads of its state, and scalars (the step index, the learning rate,
    the clipping scale), which may be shared. No op moves later than it was,
    and the stores stay last: the values computed do not change.

    The static memory plan then frees each gradient at its update, and the
    program builder computes the update in the parameter's own storage
    (there is no later read of the old value). With `clip_grad`, every update
    needs the norm of all gradients, so the updates stay after the last one.
    The statistic `moved` counts the updates that moved.

    In a pipeline rank's program (`meg.pipeline_rank`), an op of a
    weight-gradient pass (`meg.pipeline_pass = "weight.mbI"`, zero-bubble
    schedules) moves only within that pass, which the schedule delays to
    fill the bubble; and no update moves above a `meg.send_start`, which
    another rank waits for.

    ```mlir
    // before
    %gw = meg.linear %dyT, %x ...        // the last use of @w is above
    %dx = meg.linear %dy, %w ...         // the backward goes on
    ...
    %w2, %m2, %v2 = meg.adamw %w, %gw, %m, %v, %t ...
    // after
    %gw = meg.linear %dyT, %x ...
    %dx = meg.linear %dy, %w ...
    %w2, %m2, %v2 = meg.adamw %w, %gw, %m, %v, %t ...
    ...                                  // the rest of the backward
    meg.param_store @w, %w2 : tensor<64x64xf32>
    ```
  }];
  let statistics = [
    Statistic<"numMoved", "moved", "Updates moved earlier">
  ];
}

def MegChunkLoss : Pass<"meg-chunk-loss", "::mlir::ModuleOp"> {
  let summary = "Computes a language model's loss over chunks of tokens";
  let description = [{
    In the loss function (`function`, `loss` by default), a cross-entropy of
    a bias-free or biased LM head (`meg.linear`) over a final
    `meg.rms_norm`, each read by nothing else, becomes `chunks` copies of
    the three over consecutive slices of the tokens, each summing its
    cross-entropy; the sum is scaled to the mean. The tokens x vocabulary
    logits then exist a chunk at a time. The chunks' ops carry
    `meg.loss_chunk = k`, and `meg-remat` recomputes each chunk in the
    backward, where the cross-entropy's gradient needs its logits, so that
    the backward too holds one chunk's logits at a time; the LM head's
    gradient accumulates over the chunks in one buffer (the program builder
    adds each chunk's product into it). `forward` keeps its full logits.
    `chunks` must divide the number of tokens; 1 leaves the loss alone.

    ```mlir
    // before
    %n = meg.rms_norm %h, %w eps 1.0e-05 : tensor<2x256x512xf32>, tensor<512xf32>
    %logits = meg.linear %n, %head : tensor<2x256x512xf32>, tensor<8192x512xf32>
    %loss = meg.cross_entropy %logits, %labels mean : tensor<2x256x8192xf32>, tensor<2x256xi32>
    // after (chunks=2)
    %rows = meg.reshape %h : tensor<2x256x512xf32> to tensor<512x512xf32>
    %h0 = meg.slice %rows [0, 0] [256, 512] [1, 1] {meg.loss_chunk = 0 : i64} : ...
    %n0 = meg.rms_norm %h0, %w eps 1.0e-05 {meg.loss_chunk = 0 : i64} : ...
    %l0 = meg.linear %n0, %head {meg.loss_chunk = 0 : i64} : ...
    %s0 = meg.cross_entropy %l0, %y0 sum {meg.loss_chunk = 0 : i64} : ...
    ... chunk 1 ...
    %loss = meg.mul (meg.add %s0, %s1), 1/512
    ```
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "Chunks of tokens (1: the loss is left alone)">,
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The loss function">
  ];
  let statistics = [
    Statistic<"numChunked", "chunked", "Losses split into chunks">
  ];
}

def MegRemat : Pass<"meg-remat", "::mlir::ModuleOp"> {
  let summary = "Recomputes layers' activations in the backward";
  let description = [{
    In every function that returns a `loss` and runs a backward after it
    (`grad`, `train_step`), the forward ops of each transformer layer (the
    ops with `meg.layer = N`, which `megc gen` and `megc import` record; one
    unit per layer and micro-batch) keep the values the backward reads
    alive from the forward to the backward. Recomputing a unit clones the
    ops that produce them, marked `meg.recomputed`, right before the
    backward first reads one, and the backward reads the copies:

    - `mode=full` keeps only what the layer receives (its input hidden
      state, the RoPE tables) and recomputes the whole layer, as Megatron's
      full recomputation of transformer layers;
    - `mode=selective` also keeps the layer's matrix products and recomputes
      the rest: the normalizations, RoPE, the attention core, the
      activation (the attention block's internals, and the MLP's);
    - `mode=none` recomputes nothing.

    The values the unit hands to the rest of the forward (its output) stay.
    The chunks of a loss that `meg-chunk-loss` split (`meg.loss_chunk`) are
    units too, always recomputed in full, whatever the mode.
    The copies compute the same values as the originals with the same
    kernels, so training is bitwise the same. With `memory-budget` (bytes
    per rank) the pass estimates the static plan's peak (parameters and
    state, plus the arena's peak of simultaneously live intermediates) and
    climbs a ladder that does not depend on the budget: each step moves one
    layer up from `mode`, in order, to selective, then each to full. It
    takes the first step whose estimate fits, and at least `min-steps`
    steps (per pipeline rank: the driver asks a rank for more when its
    compiled plan turns out larger than the estimate), so that a budget met
    is met by every larger one. It
    records `meg.remat_steps = [taken, ladder]` on the function and says
    what it recomputes and why in a remark. A budget that every layer
    recomputed cannot meet is an error naming the smallest peak.

    A layer's all-gather of its input (sequence or context parallelism) is
    recomputed with it: every rank of the group gathers again in the
    backward instead of keeping the gathered copy, as Megatron-LM's
    sequence parallelism does. A weight that `meg-fsdp` gathered for the
    forward (`optim_grads_params`) is not kept for the copies: they read
    the backward's gather of the same parameter (its wait moved before
    them), the forward's only where the backward reads it anyway (a step
    that keeps its weights gathered over its micro-batches), or else a
    gather of their own. In a pipeline rank's program (`meg.pipeline_pass`)
    the forward is its forward passes, a unit stays within one pass, and
    the copies run in the backward pass that first reads them; with a
    budget, the rank's parameters and state are those it holds, and the
    ladder moves a layer's units of every micro-batch together. Runs after
    `meg-fuse`, so that the copies are the same kernels.

    ```mlir
    // mode=full: before
    %x = meg.rms_norm %h, %w eps 1.0e-05 {meg.layer = 0 : i64} : ...
    %q = meg.linear %x, %wq {meg.layer = 0 : i64} : ...
    ...
    %gwq = meg.matmul %dq, %x transpose_lhs : ...
    // after
    %x = meg.rms_norm %h, %w eps 1.0e-05 {meg.layer = 0 : i64} : ...
    %q = meg.linear %x, %wq {meg.layer = 0 : i64} : ...
    ...
    %x2 = meg.rms_norm %h, %w eps 1.0e-05 {meg.layer = 0 : i64, meg.recomputed} : ...
    ...
    %gwq = meg.matmul %dq, %x2 transpose_lhs : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"none\"",
           "What every layer recomputes: none, selective or full">,
    Option<"memoryBudget", "memory-budget", "uint64_t", /*default=*/"0",
           "Bytes per rank the plan's peak must fit in (0: no budget)">,
    ListOption<"minSteps", "min-steps", "unsigned",
               "Steps of the ladder taken at least under a memory budget, "
               "per pipeline rank (meg.pipeline_rank; a function of none "
               "takes the first; missing ones are 0)">
  ];
  let statistics = [
    Statistic<"numRecomputed", "recomputed", "Ops recomputed">
  ];
}

def MegKeepAttentionStats : Pass<"meg-keep-attention-stats",
                                 "::mlir::func::FuncOp"> {
  let summary = "Hands attention's softmax statistics to its gradient";
  let description = [{
    The fused attention's backward needs each query row's log-sum-exp of the
    scores, which its forward computes on the way (the online softmax's
    running maximum and sum). Without them the backward recomputes them: one
    more pass over the keys, a product of q and k and its exponentials per
    block (on cuDNN, a whole second forward).

    For every `meg.attention_grad` whose forward output comes from a
    `meg.attention` of the same q, k, v, mask and scale, this pass makes the
    forward return its statistics (`stats`, `[B, H, Sq]` f32: B x H x Sq x 4
    bytes, kept from the forward to the backward) and passes them to the
    gradient. A forward recomputed for the backward (`meg-remat`) hands over
    its own. A gradient whose output comes from elsewhere (a function
    argument, another graph region) is left alone and still recomputes them.
    The values computed do not change: the statistics are the ones the
    backward would compute. Runs after `meg-autodiff` (and `meg-remat`), so
    that every gradient exists.

    ```mlir
    // before
    %o = meg.attention %q, %k, %v causal scale 0.125 : ...
    ...
    %dq, %dk, %dv = meg.attention_grad %do, %q, %k, %v, %o causal scale 0.125 : ...
    // after
    %o, %lse = meg.attention %q, %k, %v causal scale 0.125 stats : ...
    ...
    %dq, %dk, %dv = meg.attention_grad %do, %q, %k, %v, %o stats %lse causal
        scale 0.125 : ..., tensor<2x8x256xf32>
    ```
  }];
  let statistics = [
    Statistic<"numKept", "kept", "Attention gradients given the statistics">
  ];
}

def MegFsdp : Pass<"meg-fsdp", "::mlir::ModuleOp"> {
  let summary = "FSDP / HSDP: shards weights, gradients and optimizer state";
  let description = [{
    Applies the module's `meg.fsdp` configuration (Megatron-FSDP's strategy
    table) to every function; without one the pass changes nothing. Every
    rank runs the functions on its own slice of the global batch (the
    functions are written for one data-parallel rank's batch; the runtime
    hands each rank its rows of the global inputs).

    | strategy | model weights | main weights, moments | gradients |
    |---|---|---|---|
    | no_shard | replicated | replicated | replicated |
    | optim | replicated | sharded | replicated |
    | optim_grads | replicated | sharded | sharded |
    | optim_grads_params | sharded | sharded | sharded |

    Sharded parameters become their rank's 1-D piece (`#meg.sharding`): the
    flattened tensor padded with zeros to a multiple of the group size.
    Under `optim_grads_params`, every read of a weight becomes an
    all-gather over the shard axes, grouped by unit (a transformer layer:
    the parameters with the same `meg.layer`; a parameter without one is
    its own unit)
    and started one unit ahead (`meg.all_gather_start` / `meg.wait`), and
    the backward pass (after the loss) gathers again. Gradients are reduced
    in buckets of `bucket_mb` in the order they become ready, in the policy's
    `grad_reduce` dtype: reduce-scatter on the shard axes when gradients are
    sharded, all-reduce otherwise, averaging in the collective; with outer
    axes (HSDP), an all-reduce over them, or under `outer_strategy = optim` a
    reduce-scatter that shards the optimizer state over both groups (and one
    all-gather over the outer axes of each updated weight). AdamW updates
    only the local piece; replicated weights are all-gathered from the
    updated pieces. Entry results are averaged over the data-parallel group
    (the loss, `grad.*` results) or gathered along dim 0 (batch-major
    results); a `meg.label_count ... global` becomes its mean over the
    group (an all-reduce of one scalar), so that a loss ignoring padding
    divides by the global count. The pass registers the submeshes it uses: the shard axes, the
    outer axes, the data-parallel group (outer then shard axes), and for
    `outer_strategy = optim` the state group (shard then outer axes).
    Frozen parameters stay replicated. A parameter that is a block over
    shard axes (experts over `ep`, whose ranks compute on their own tokens
    and exchange them with all-to-alls) is sharded over the shard axes less
    those, its expert-data-parallel group, registered with the matching
    data and state groups; its gradient, already summed over the ranks that
    sent it tokens, is scaled by one over their count before the mean, and
    reduced in buckets of its own. A `meg.data_sum` becomes an all-reduce
    (sum) over the data-parallel group. Mesh axes outside the shard and
    outer axes are the model's (tensor parallelism): a parameter that is a
    tensor-parallel block (`#meg.sharding` with `dim`) has its block split
    into pieces (`dim` and `block_axes` kept on the pieces' sharding), and
    the clipping norm sums the blocks' squares over their axes too; a
    parameter that is a flat piece already is an error.

    ```mlir
    // optim_grads_params over dp_shard = 4: before
    meg.param @w : tensor<64x32xf32> init #meg.init<normal(0.02)>
    %w = meg.param_ref @w : tensor<64x32xf32>
    // after
    meg.param @w : tensor<512xf32> init #meg.init<normal(0.02)>
        sharding #meg.sharding<mesh = @world, axes = ["dp_shard"], shape = [64, 32]>
    %p = meg.param_ref @w : tensor<512xf32>
    %f = meg.all_gather_start %p over @world[dp_shard] dim 0
        : tensor<512xf32> -> !meg.future<tensor<2048xf32>>
    %g = meg.wait %f : !meg.future<tensor<2048xf32>>
    %w = meg.reshape %g : tensor<2048xf32> to tensor<64x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let options = [
    Option<"step", "step", "std::string", /*default=*/"\"train_step\"",
           "The training step whose AdamW updates are sharded">
  ];
}

def MegTensorParallel : Pass<"meg-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Tensor and sequence parallelism: Megatron's layout of the "
                "layers that record a #meg.tp_layer";
  let description = [{
    Applies the module's `meg.tensor_parallel` (the group of mesh axes, G
    ranks, and whether sequence parallelism is on) to a model written for
    one device; without it the model runs on one rank, where every layer is
    whole, and the pass only drops the layers' splits. It runs before
    autodiff: the collectives it inserts have the conjugate gradients
    (Megatron's f and g operators), so the backward follows.

    The layers' split is what their builder recorded (`#meg.tp_layer`):

    - `column` linear: the weight and bias split along dim 0 (this rank's
      block of output features; with `groups` fewer than G, the group's
      block, every rank holding the whole weight). Its input enters the
      group (`meg.copy_to_group`: the gradient summed over the ranks), its
      output is split along the last dimension.
    - `row` linear: the weight split along dim 1; its input must be split
      along its features, and its partial products are summed
      (`meg.all_reduce`), or with sequence parallelism reduce-scattered into
      sequence blocks; the bias is added after the sum.
    - `vocab` embedding: the table's rows split; each rank looks up the ids
      in its block (`rows from` the block's first row) and the rows are
      summed (or reduce-scattered).

    Splits then follow the data: elementwise ops, norms over unsplit
    dimensions, RoPE and attention over split heads (or batch), reshapes
    that keep a split dimension's blocks contiguous, transposes and slices
    keep it; reductions over it are completed over the group; a
    cross-entropy of logits split along the classes becomes Megatron's
    vocab-parallel cross-entropy (maximum, sum of exponentials and target
    logit reduced over the group, the logits never gathered). A whole value
    that depends on trainable parameters and meets split ones (a norm weight
    applied to this rank's heads or sequence block) enters the group, so
    that its gradient is summed; one that is whole along the split
    dimension is sliced into this rank's block. An op that needs a split
    value whole (an entry's result, an op with no split form) gets it
    gathered (`meg.all_gather`; counted in the pass statistics, where LLVM
    keeps statistics). Split
    parameters get their block's type and a `#meg.sharding` with `dim`;
    the group's submesh is registered. The pass removes the attributes it
    applied.

    Errors name what cannot be split: a layer whose features or groups the
    ranks do not divide, a parameter split two ways, a sequence the ranks
    do not divide, a group's block (shared by several ranks) that an op
    other than attention needs whole.

    ```mlir
    // before (tp = 2)
    %x = meg.rms_norm %h, %wn eps 1e-5 : tensor<2x8x32xf32>, tensor<32xf32>
    %u = meg.linear %x, %wu {meg.tp_layer = #meg.tp_layer<column>}
        : tensor<2x8x32xf32>, tensor<48x32xf32>
    %a = meg.silu %u : tensor<2x8x48xf32>
    %y = meg.linear %a, %wd {meg.tp_layer = #meg.tp_layer<row>}
        : tensor<2x8x48xf32>, tensor<32x48xf32>
    // after
    %x = meg.rms_norm %h, %wn eps 1e-5 : tensor<2x8x32xf32>, tensor<32xf32>
    %e = meg.copy_to_group %x over @world[tp] : tensor<2x8x32xf32>
    %u = meg.linear %e, %wu : tensor<2x8x32xf32>, tensor<24x32xf32>
    %a = meg.silu %u : tensor<2x8x24xf32>
    %p = meg.linear %a, %wd : tensor<2x8x24xf32>, tensor<32x24xf32>
    %y = meg.all_reduce %p over @world[tp] sum : tensor<2x8x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numGathered", "gathered",
              "Split values gathered whole for an op that needs them so">
  ];
}

def MegRingAttention : Pass<"meg-ring-attention", "::mlir::ModuleOp"> {
  let summary = "Expands ring attention over a context-parallel group into "
                "the ring's shifts and block attentions";
  let description = [{
    Expands every `meg.ring_attention` and `meg.ring_attention_grad` (after
    autodiff has paired them) over its group of C ranks, each holding
    chunks i and 2C - 1 - i of the sequence:

    - the forward attends to the rank's own keys causally (with
      statistics), then C - 1 times passes the key and value block on
      (`meg.shift` by 1) and attends to the block received, each query
      seeing the keys before its position (`positions`, a per-rank
      constant: a block of an earlier rank is seen through its first chunk
      by all queries, one of a later rank whole by the second query chunk
      only); each partial result joins the running one in f32 by their
      log-sum-exp statistics (a query that sees no key of a block gets the
      weight 0);
    - the gradient runs `meg.attention_grad` of each step given the
      forward's output and final statistics (so each block's probabilities
      are the whole softmax's), passes the blocks around again, adds up
      the query gradient, and gathers each block's key and value gradients
      on their way from the rank after the block's own (step 1) around to
      its own, which adds its share last.

    A rank holds at most its own block and the one in flight; C - 1 shifts
    of the keys and values run forward, and C - 1 of them and of their
    gradients backward: per layer 6 (C - 1) / C times the bytes of the
    whole sequence's keys and values, against the all-gather's 4 (C - 1) /
    C (which keeps them whole for the backward). Errors: a gradient whose output is not a ring
    forward's of the same function, a group that is not registered.

    ```mlir
    // before (cp = 2)
    %o = meg.ring_attention %q, %k, %v over @world[cp] scale 0.35
        : tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
    // after
    %o0, %l0 = meg.attention %q, %k, %v causal scale 0.35 stats : ...
    %k1 = meg.shift %k over @world[cp] by 1 : tensor<1x4x2x8xf32>
    %v1 = meg.shift %v over @world[cp] by 1 : tensor<1x4x2x8xf32>
    %o1, %l1 = meg.attention %q, %k1, %v1 causal
        positions(%p1 : tensor<4xi32>) scale 0.35 stats : ...
    // the merge of (%o0, %l0) and (%o1, %l1)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numRings", "rings", "Ring attentions expanded">
  ];
}

def MegContextParallel : Pass<"meg-context-parallel", "::mlir::ModuleOp"> {
  let summary = "Context parallelism: every sequence split over the ranks of "
                "the module's #meg.context_parallel, load-balanced for "
                "causal attention";
  let description = [{
    Applies the module's `meg.context_parallel` (the group of mesh axes, C
    ranks) to a model written for one device; without it the pass does
    nothing. It runs before tensor parallelism and autodiff: the collectives
    it inserts have the conjugate gradients, so the backward follows.

    The sequence is cut into 2C chunks; rank i holds chunks i and
    2C - 1 - i, so that every rank does the same share of causal attention.
    Entry inputs stay the whole samples: the token sequences the model reads
    (the ids of a `meg.embedding`, the labels of a `meg.cross_entropy` or
    `meg.label_count`, along their last dimension) are cut into this rank's
    chunks where they enter (`meg.shard_slice` of the chunks reordered
    rank by rank), and the split follows the data through elementwise ops,
    norms, linear layers and matrix products, RoPE, transposes, slices and
    splits that keep the sequence a dimension, and reshapes that keep it or
    merge it with the batch into token rows (and back). A mixture-of-experts
    layer routes this rank's tokens: each expert's capacity on a rank is its
    share (1/C of its slots), and the gathers between tokens and slots and
    expert parallelism's all-to-alls stay on the rank. A sum over the split
    sequence adds up the ranks' partial sums (`meg.all_reduce`, then
    `meg.copy_to_group`: every rank uses the total). A whole value computed
    without parameters that meets the split sequence (positions, RoPE
    tables) is cut the same way.
    Each `meg.attention` gathers the keys and values over the group
    (`meg.all_gather`, whose gradient is the reduce-scatter of theirs) back
    into the original order, and with `causal` takes its queries' positions
    (`positions`), so that every query sees exactly the keys before it.
    Token losses and label counts are this rank's: `meg-fsdp` averages the
    loss and sums the gradients over its group, which must hold the context
    axes (`#meg.fsdp<..., context_axes = [...]>`) in a training model.
    Entry results that hold a split sequence (the logits) are gathered in
    the original order. The group's submesh is registered; the pass removes
    the attribute it applied.

    With `attention = ring` each causal attention becomes one
    `meg.ring_attention` of this rank's queries, keys and values instead
    (expanded by `meg-ring-attention` after autodiff).

    Errors: a sequence that 2C does not divide, a model without attention,
    an op with no context-parallel form, a parameter-dependent value along
    the sequence, a training model whose `meg.fsdp` lacks the context axes,
    an expert capacity that C does not divide, a non-causal attention with
    the ring.

    ```mlir
    // before (cp = 2, a sequence of 8)
    %o = meg.attention %q, %k, %v causal scale 0.35
        : tensor<1x8x4x8xf32>, tensor<1x8x2x8xf32>, tensor<1x8x2x8xf32>
    // after: this rank's 4 queries (chunks i and 3 - i) against all 8 keys
    %kt = meg.all_gather %k2 over @world[cp] dim 0 : tensor<4x1x2x8xf32>
    ...
    %o = meg.attention %q, %k8, %v8 causal positions(%pos : tensor<4xi32>)
        scale 0.35 : tensor<1x4x4x8xf32>, tensor<1x8x2x8xf32>,
          tensor<1x8x2x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numGathered", "gathered",
              "Entry results gathered whole in the original token order">
  ];
}

def MegPipelineStages : Pass<"meg-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "Pipeline parallelism: the model cut into stages at its "
                "recorded layers";
  let description = [{
    Applies the module's `meg.pipeline` (the group of mesh axes, P ranks, V
    virtual stages each): cuts the model into P x V stages of whole layers
    (`meg.layer` on the parameters), the embedding with the first stage and
    the final norm, the LM head and the loss with the last. With `layers`
    the cut is the user's (one count per stage, each at least 1, summing to
    the layers); otherwise it is balanced: a layer costs the work of its ops
    in the loss function (matrix products and attention by their flops,
    half the scores under a causal mask; other ops by the elements they
    write), the ops before the first layer count on the first stage and
    those after the last on the last, and the contiguous split whose
    largest stage costs least is taken (a remark gives each stage's layers
    and cost). The decision is recorded: the attribute gets every stage's
    layers, and each parameter the stages that hold it (`meg.stages`): its
    layer's, or for a parameter outside the layers the stages of the ops
    that read it (a tied embedding, read by the embedding and the LM head:
    the first and the last). Each op of the model's functions records its
    stage (`meg.stage`): a layer's op its layer's, another the latest stage
    of the values it reads (the final norm, the head and the loss read the
    last layer's output); ops that read no staged value (constants, the
    inputs, an unlayered parameter) record none. meg-autodiff gives each
    gradient op its forward op's stage.

    Errors: a model that records no layers, more stages than layers, a
    given cut whose count, sum or any stage does not fit.

    ```mlir
    // before: 4 layers, pp = 2
    module attributes {meg.pipeline = #meg.pipeline<mesh = @world,
        axes = ["pp"]>} { ... }
    // after: the head's work goes with the last stage
    module attributes {meg.pipeline = #meg.pipeline<mesh = @world,
        axes = ["pp"], layers = [3, 1]>} {
      meg.param @w0 : tensor<8x8xf32> ... {meg.layer = 0 : i64,
          meg.stages = array<i64: 0>}
    ```
  }];
}

def MegPipelineSplit : Pass<"meg-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "Pipeline parallelism: each rank's program of every entry, "
                "in its schedule's order";
  let description = [{
    Replaces each public function of a module with a `meg.pipeline` (its
    stages cut by meg-pipeline-stages, its ops recording `meg.stage`,
    `meg.backward` and `meg.micro_batch`) by one function per rank of the
    pipeline group (`meg.entry_name`, `meg.pipeline_rank`), which the
    program builder makes that rank's entry of the same name.

    An op runs on its recorded stage; one that records none runs on the
    stage of the values it reads, or, reading none, on every stage that
    needs it (constants, the inputs' micro-batch slices, the positions'
    tables). A rank runs its stages' forward and backward passes of each
    micro-batch in the order of the schedule (`lib/Pipeline`: 1f1b,
    interleaved or zb-h1 for the training step; every other entry runs its
    single micro-batch through the stages and back), each value a stage
    reads from a stage of another rank received (`meg.recv_start`, waited
    for right before the pass) and sent (`meg.send_start`) right after the
    pass that makes it. A send is waited for once a later receive from the
    same rank proves it arrived (an activation once its gradient comes
    back), else at the end of the passes, so that nothing blocks on a
    transfer the schedule has not reached. What follows the last pass (the
    optimizer step) runs on every rank in the function's order: a sum of
    values of several stages (the gradient norm's, a tied weight's
    gradient) is summed on each rank and all-reduced over the pipeline
    group, and a value one stage makes that another rank needs there (the
    loss, the count of non-finite values that skips an update) all-reduced
    with zeros from the others; every rank returns every result.

    With zb-h1, a backward pass splits into B (what the gradients sent to
    the previous stage need) and W (the rest: the weight gradients), and
    the schedule places each W in time its rank would otherwise wait.

    An op that reads values of several stages and is not a sum (an update
    reading its gradient and the step's count of non-finite values) runs
    after the passes on the stage of its largest input, the others
    all-reduced to it; a parameter that ranks of several stages read (the
    step count, a tied embedding) is stored by each of them; one a single
    rank updates records it (`meg.pipeline_owner`), and checkpoints take it
    from there.

    Errors: a schedule that does not fit the micro-batches, a pass of the
    function the schedule does not run, transfers between two ranks that
    the receiver would take in another order than sent, a value every rank
    needs that is not floating-point.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // MEGC_DIALECT_MEG_TRANSFORMS_PASSES_TD

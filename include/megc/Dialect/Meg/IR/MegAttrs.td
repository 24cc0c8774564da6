//===- MegAttrs.td - meg enums and attributes --------------*- tablegen -*-===//
//
// Enumerations and attributes of the meg dialect: parameter init specs,
// sharding, the FSDP strategy, the precision policy, AdamW settings and the
// kernel strategies the back end records.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGATTRS_TD
#define MEGC_DIALECT_MEG_IR_MEGATTRS_TD

include "megc/Dialect/Meg/IR/MegBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Meg_FsdpStrategy : I32EnumAttr<"FsdpStrategy", "FSDP sharding strategy", [
    I32EnumAttrCase<"no_shard", 0>,
    I32EnumAttrCase<"optim", 1>,
    I32EnumAttrCase<"optim_grads", 2>,
    I32EnumAttrCase<"optim_grads_params", 3>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_FsdpStrategyAttr : EnumAttr<Meg_Dialect, Meg_FsdpStrategy, "fsdp_strategy"> {
  let assemblyFormat = "$value";
}

def Meg_CpAttention : I32EnumAttr<"CpAttention",
    "how attention meets the keys of a context-parallel group", [
    I32EnumAttrCase<"allgather", 0>,
    I32EnumAttrCase<"ring", 1>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

def Meg_RopeLayout : I32EnumAttr<"RopeLayout", "tensor layout of a RoPE input", [
    I32EnumAttrCase<"bshd", 0>,
    I32EnumAttrCase<"sbhd", 1>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_RopeLayoutAttr : EnumAttr<Meg_Dialect, Meg_RopeLayout, "layout"> {
  let assemblyFormat = "$value";
}

def Meg_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation used by gelu", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_GeluApproximationAttr
    : EnumAttr<Meg_Dialect, Meg_GeluApproximation, "gelu_approximation"> {
  let assemblyFormat = "$value";
}

def Meg_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a tensor op", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_ReduceKindAttr : EnumAttr<Meg_Dialect, Meg_ReduceKind, "reduce_kind"> {
  let assemblyFormat = "$value";
}

def Meg_DropPolicy : I32EnumAttr<"DropPolicy",
    "which tokens an expert over its capacity keeps", [
    I32EnumAttrCase<"probs", 0>,
    I32EnumAttrCase<"position", 1>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_DropPolicyAttr : EnumAttr<Meg_Dialect, Meg_DropPolicy, "drop_policy"> {
  let assemblyFormat = "$value";
}

def Meg_CollectiveReduce : I32EnumAttr<"CollectiveReduce",
    "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}
def Meg_CollectiveReduceAttr
    : EnumAttr<Meg_Dialect, Meg_CollectiveReduce, "collective_reduce"> {
  let assemblyFormat = "$value";
}

def Meg_InitKind : I32EnumAttr<"InitKind", "parameter initialisation", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"normal", 2>,
    I32EnumAttrCase<"uniform", 3>,
    I32EnumAttrCase<"copy", 4>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

def Meg_KernelStrategyKind : I32EnumAttr<"KernelStrategyKind",
    "how a kernel's loops use the hardware", [
    I32EnumAttrCase<"serial", 0>,
    I32EnumAttrCase<"pointwise", 1>,
    I32EnumAttrCase<"row_reduction", 2>,
    I32EnumAttrCase<"column_reduction", 3>,
    I32EnumAttrCase<"full_reduction", 4>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

def Meg_TargetKind : I32EnumAttr<"TargetKind",
    "the kind of device kernels are compiled for", [
    I32EnumAttrCase<"cpu", 0>,
    I32EnumAttrCase<"cuda", 1>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

def Meg_TpLayerKind : I32EnumAttr<"TpLayerKind",
    "how a layer splits over tensor-parallel ranks", [
    I32EnumAttrCase<"column", 0>,
    I32EnumAttrCase<"row", 1>,
    I32EnumAttrCase<"vocab", 2>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

def Meg_StateRole : I32EnumAttr<"StateRole",
    "what an optimizer state parameter holds for its parameter", [
    I32EnumAttrCase<"exp_avg", 0>,
    I32EnumAttrCase<"exp_avg_sq", 1>,
    I32EnumAttrCase<"main_param", 2>]> {
  let cppNamespace = "::mlir::meg";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Meg_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Meg_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A double printed in its shortest round-tripping decimal form.
def Meg_F64Parameter : APFloatParameter<"a 64-bit float"> {
  let printer = "::mlir::meg::printF64($_printer, $_self.convertToDouble())";
  let parser = "::mlir::meg::parseF64AsAPFloat($_parser)";
}

def Meg_ClipParameter : APFloatParameter<"a gradient-norm bound, 0 for none"> {
  let printer = "::mlir::meg::printF64($_printer, $_self.convertToDouble())";
  let parser = "::mlir::meg::parseF64AsAPFloat($_parser)";
  let defaultValue = "::llvm::APFloat(0.0)";
}

def Meg_InitAttr : Meg_Attr<"Init", "init"> {
  let summary = "How a parameter is initialised";
  let description = [{
    `zeros`, `ones`, `normal(std)` (mean 0), `uniform(bound)` (in
    [-bound, bound]) or `copy(@param)`: the value of another parameter of
    the same shape, converted to this one's element type (the f32 master
    copy of a bf16 weight). The runtime draws from a seeded generator, and
    re-derives copies whenever the model weights are set or loaded.

    ```mlir
    #meg.init<normal(0.02)>
    #meg.init<ones>
    #meg.init<copy(@model.layers.0.mlp.up_proj.weight)>
    ```
  }];
  let parameters = (ins "::mlir::meg::InitKind":$kind,
                        Meg_F64Parameter:$scale,
                        OptionalParameter<"::mlir::FlatSymbolRefAttr">:$source);
  let builders = [
    AttrBuilder<(ins "::mlir::meg::InitKind":$kind, "::llvm::APFloat":$scale), [{
      return $_get($_ctxt, kind, scale, ::mlir::FlatSymbolRefAttr());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Meg_ShardingAttr : Meg_Attr<"Sharding", "sharding"> {
  let summary = "This rank's piece of a parameter sharded over mesh axes";
  let description = [{
    The parameter is one rank's piece of a tensor of shape `shape`, split
    over the group formed by `axes` of `mesh` (of size `G`, ranks indexed
    row-major over their coordinates on `axes`, in the listed order).

    Without `dim`, that tensor, flattened row-major and zero-padded to
    `n * G` elements, is split into `G` contiguous pieces of `n` elements,
    and the parameter (of type `tensor<n x T>`) is the piece of this rank's
    index in the group. meg-fsdp shards parameters this way.

    With `dim = d`, the tensor is split along dimension `d` into `G` equal
    blocks (`G` must divide `shape[d]`) and the parameter, of the tensor's
    rank, is the block of this rank's index: Megatron's column-parallel
    (d = 0 of an [out, in] weight) and row-parallel (d = 1) layers.

    With `dim = d` and `block_axes`, both: the tensor is cut along `d` into
    blocks over the group of `block_axes` (tensor parallelism), and this
    rank's block, flattened and padded, is split over `axes` as without
    `dim` (FSDP on top of tensor parallelism); the parameter is 1-D.

    ```mlir
    meg.param @w : tensor<512xf32> init #meg.init<normal(0.02)>
        sharding #meg.sharding<mesh = @world, axes = ["dp_shard"],
                               shape = [64, 32]>
    meg.param @q : tensor<32x64xf32> init #meg.init<normal(0.02)>
        sharding #meg.sharding<mesh = @world, axes = ["tp"],
                               shape = [64, 64], dim = 0>
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        ArrayRefParameter<"int64_t">:$shape,
                        DefaultValuedParameter<"int64_t", "-1">:$dim,
                        OptionalParameter<"::mlir::ArrayAttr">:$block_axes);
  let assemblyFormat = [{
    `<` `mesh` `=` $mesh `,` `axes` `=` $axes `,` `shape` `=` `[` $shape `]`
    (`,` `dim` `=` $dim^)? (`,` `block_axes` `=` $block_axes^)? `>`
  }];
  let builders = [
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$mesh,
                     "::mlir::ArrayAttr":$axes,
                     "::llvm::ArrayRef<int64_t>":$shape), [{
      return $_get($_ctxt, mesh, axes, shape, -1, ::mlir::ArrayAttr());
    }]>,
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$mesh,
                     "::mlir::ArrayAttr":$axes,
                     "::llvm::ArrayRef<int64_t>":$shape, "int64_t":$dim), [{
      return $_get($_ctxt, mesh, axes, shape, dim, ::mlir::ArrayAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the tensor is cut into blocks along `dim` (over `axes`, or
    /// over `block_axes` before the flat split over `axes`).
    bool isBlock() const { return getDim() >= 0; }
    /// Whether the parameter is a 1-D piece of a flattened tensor (the
    /// whole one, or this rank's block of it).
    bool isFlat() const { return getDim() < 0 || getBlockAxes(); }
    /// The axes whose group splits the tensor into blocks, if any.
    ::mlir::ArrayAttr getBlockGroup() const {
      return getBlockAxes() ? getBlockAxes()
                            : (isBlock() ? getAxes() : ::mlir::ArrayAttr());
    }
    /// The shape of this rank's block along `dim` over `blocks` ranks.
    ::llvm::SmallVector<int64_t> blockShape(int64_t blocks) const {
      ::llvm::SmallVector<int64_t> shape(getShape());
      if (isBlock())
        shape[getDim()] /= blocks;
      return shape;
    }
  }];
  let genVerifyDecl = 1;
}

def Meg_FsdpAttr : Meg_Attr<"Fsdp", "fsdp"> {
  let summary = "FSDP / HSDP configuration of a module";
  let description = [{
    `strategy` says which of model weights, main weights, gradients and
    optimizer state are sharded over the `shard` axes. With `outer` axes the
    setup is HSDP: `outer_strategy` is `no_shard` (replicate across the outer
    group) or `optim` (optimizer state sharded there too; requires
    `optim_grads_params`). `bucket_mb` sizes the gradient buckets.

    Every rank of the group (outer and shard axes) computes on its own
    tokens: the gradients and the loss are averaged over all of it. Each
    rank holds its slice of the batch, except over the `context_axes`
    (shard axes that split each sample's sequence instead: context
    parallelism folded into the data-parallel group, as Megatron's dp x cp),
    whose ranks hold the same samples.

    ```mlir
    #meg.fsdp<strategy = optim_grads_params, mesh = @world,
              shard = ["dp_shard"], outer = ["dp_outer"],
              outer_strategy = no_shard, bucket_mb = 40>
    #meg.fsdp<strategy = no_shard, mesh = @world, shard = ["dp_shard", "cp"],
              context_axes = ["cp"]>
    ```
  }];
  let parameters = (ins
      "::mlir::meg::FsdpStrategy":$strategy,
      "::mlir::FlatSymbolRefAttr":$mesh,
      "::mlir::ArrayAttr":$shard,
      OptionalParameter<"::mlir::ArrayAttr">:$outer,
      DefaultValuedParameter<"::mlir::meg::FsdpStrategy",
                             "::mlir::meg::FsdpStrategy::no_shard">:$outer_strategy,
      DefaultValuedParameter<"int64_t", "40">:$bucket_mb,
      OptionalParameter<"::mlir::ArrayAttr">:$context_axes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes that split the batch: outer, then shard, less the
    /// context axes.
    ::mlir::ArrayAttr getBatchAxes() const;
  }];
}

def Meg_PrecisionAttr : Meg_Attr<"Precision", "precision"> {
  let summary = "Precision policy of parameters, gradients and optimizer state";
  let description = [{
    The dtype of each buffer of the training step, after Megatron's
    precision-aware optimizer: `param` (model weights, compute dtype),
    `main_params` (master weights, f32 or f16), `main_grads` (gradients as
    the optimizer consumes them, f32 or bf16), `grad_reduce` (dtype of the
    gradient reduction), `exp_avg` and `exp_avg_sq` (stored moments).

    ```mlir
    #meg.precision<param = bf16, main_params = f32, main_grads = f32,
                   grad_reduce = f32, exp_avg = f32, exp_avg_sq = f32>
    ```
  }];
  let parameters = (ins "::mlir::Type":$param, "::mlir::Type":$main_params,
                        "::mlir::Type":$main_grads, "::mlir::Type":$grad_reduce,
                        "::mlir::Type":$exp_avg, "::mlir::Type":$exp_avg_sq);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_AdamWAttr : Meg_Attr<"AdamW", "adamw"> {
  let summary = "AdamW hyper-parameters";
  let description = [{
    Decoupled weight decay with bias correction:
    `m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     p = p - lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)`.
    With `clip_grad` > 0 (omitted: 0, off) the gradients are first scaled
    by `min(1, clip_grad / (norm + 1e-6))`, norm being the L2 norm of all
    trainable gradients in f32 (`torch.nn.utils.clip_grad_norm_`).

    ```mlir
    #meg.adamw<lr = 3.0e-4, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8,
               weight_decay = 0.1>
    ```
  }];
  let parameters = (ins Meg_F64Parameter:$lr, Meg_F64Parameter:$beta1,
                        Meg_F64Parameter:$beta2, Meg_F64Parameter:$eps,
                        Meg_F64Parameter:$weight_decay,
                        Meg_ClipParameter:$clip_grad);
  let builders = [
    AttrBuilder<(ins "::llvm::APFloat":$lr, "::llvm::APFloat":$beta1,
                     "::llvm::APFloat":$beta2, "::llvm::APFloat":$eps,
                     "::llvm::APFloat":$weight_decay), [{
      return $_get($_ctxt, lr, beta1, beta2, eps, weight_decay,
                   ::llvm::APFloat(0.0));
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_LrScheduleKind : I32EnumAttr<"LrScheduleKind",
    "learning-rate schedule after warmup", [
  I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"linear", 1>,
  I32EnumAttrCase<"cosine", 2>, I32EnumAttrCase<"wsd", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::meg";
}
def Meg_LrScheduleKindAttr
    : EnumAttr<Meg_Dialect, Meg_LrScheduleKind, "lr_schedule_kind"> {
  let assemblyFormat = "$value";
}

def Meg_WsdDecayStyle : I32EnumAttr<"WsdDecayStyle",
    "how a warmup-stable-decay schedule decays", [
  I32EnumAttrCase<"linear", 0>, I32EnumAttrCase<"cosine", 1>,
  I32EnumAttrCase<"exponential", 2>, I32EnumAttrCase<"minus_sqrt", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::meg";
}
def Meg_WsdDecayStyleAttr
    : EnumAttr<Meg_Dialect, Meg_WsdDecayStyle, "wsd_decay_style"> {
  let assemblyFormat = "$value";
}

def Meg_LrScheduleAttr : Meg_Attr<"LrSchedule", "lr_schedule"> {
  let summary = "Learning-rate schedule of the training step (Megatron's)";
  let description = [{
    The learning rate of update n (counted from 0), from the optimizer's
    `lr` as max_lr, W = `warmup`, D = `decay`: while n <= W (W > 0),
    `init_lr + (max_lr - init_lr) n / W`; then `constant` keeps max_lr;
    past D it is `min_lr`; otherwise, with r = (n - W) / (D - W), `min_lr +
    c (max_lr - min_lr)` with c = 1 - r (`linear`), 0.5 (cos(pi r) + 1)
    (`cosine`), or for `wsd` 1 until n = D - `wsd_decay` and then the
    `wsd_style` decay over the last `wsd_decay` steps. The runtime computes
    it before each step from the step count and writes it to `lr_param`,
    which `meg-optimizer` declares and records here with `step_param`.

    ```mlir
    #meg.lr_schedule<kind = cosine, warmup = 100, decay = 10000,
                     min_lr = 3.0e-5, init_lr = 0.0, wsd_decay = 0,
                     wsd_style = linear>
    ```
  }];
  let parameters = (ins "::mlir::meg::LrScheduleKind":$kind,
                        "int64_t":$warmup, "int64_t":$decay,
                        Meg_F64Parameter:$min_lr, Meg_F64Parameter:$init_lr,
                        "int64_t":$wsd_decay,
                        "::mlir::meg::WsdDecayStyle":$wsd_style,
                        OptionalParameter<"::mlir::FlatSymbolRefAttr">:$lr_param,
                        OptionalParameter<"::mlir::FlatSymbolRefAttr">:$step_param);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_KernelStrategyAttr : Meg_Attr<"KernelStrategy", "kernel_strategy"> {
  let summary = "How a kernel is split into workgroups and vectorized";
  let description = [{
    Recorded on a kernel function (`meg.kernel_strategy`) by
    `meg-select-kernel-strategy` and realised by the passes after it. The
    kernel's main loop nest iterates over `domain` (its outermost
    dimensions, shared by the kernel's loop nests) and further, inner
    dimensions; the domain is split into workgroups of `tile` each, so the
    dispatch grid has `prod(domain[i] / tile[i])` workgroups, and the
    innermost loop runs `vector` elements per vector operation.

    - `pointwise`: every element independent (the domain covers the outer
      dimensions of an elementwise nest).
    - `row_reduction`: the dimensions inside the domain are reduced (norms,
      softmax, cross-entropy over the vocabulary); each workgroup reduces
      whole rows.
    - `column_reduction`: domain dimensions are reduced (a norm's weight
      gradient summed over the tokens): each workgroup writes partial sums
      for its tile into scratch, and a combine dispatch reduces the
      partials of all workgroups in workgroup order.
    - `full_reduction`: the result is a scalar (the loss), reduced in the
      same two stages.
    - `serial`: one workgroup runs the kernel as written.

    Results do not depend on how many threads or blocks run the grid: the
    domain, tiles and combine order are fixed here.

    ```mlir
    func.func @megk5_meg_rms_norm(...) attributes {meg.kernel_strategy =
        #meg.kernel_strategy<row_reduction, domain = [2, 256],
                             tile = [1, 16], vector = 16>}
    ```
  }];
  let parameters = (ins "::mlir::meg::KernelStrategyKind":$kind,
                        ArrayRefParameter<"int64_t">:$domain,
                        ArrayRefParameter<"int64_t">:$tile,
                        "int64_t":$vector);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Workgroups in the dispatch grid: prod(domain[i] / tile[i]).
    int64_t getGridSize() const;
  }];
}

def Meg_TargetAttr : Meg_Attr<"Target", "target"> {
  let summary = "The device a module's kernels are compiled for";
  let description = [{
    The module attribute `meg.target`: what the kernel passes
    (`meg-select-kernel-strategy`, `meg-distribute-workgroups`) size their
    grids and vectors for, parsed once (by the driver from `--target`,
    `--cpu` and `--cuda-arch`, or by `meg-set-target`) and read from here.
    `cpu`: vector registers of `vector_bits` (128 for baseline x86-64, 256
    with AVX2, 512 with AVX-512). `cuda`: the architecture, from which the
    block size, the vector width, the multiprocessors and the shared memory
    follow (`megc/Target/CudaArch.h`). A module without `meg.target` is for
    the CPU with 128-bit vectors.

    ```mlir
    module attributes {meg.target = #meg.target<cuda, arch = "sm_90a">} {}
    module attributes {meg.target = #meg.target<cpu, vector_bits = 512>} {}
    ```
  }];
  let parameters = (ins "::mlir::meg::TargetKind":$kind,
                        "unsigned":$vectorBits,
                        "unsigned":$cudaMajor, "unsigned":$cudaMinor,
                        "char":$cudaSuffix);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static TargetAttr getCpu(::mlir::MLIRContext *context, unsigned vectorBits);
    static TargetAttr getCuda(::mlir::MLIRContext *context,
                              const ::megc::CudaArch &arch);
    /// The module's meg.target, or the CPU with 128-bit vectors.
    static TargetAttr of(::mlir::Operation *module);
    bool isCuda() const { return getKind() == TargetKind::cuda; }
    /// The architecture of a cuda target.
    ::megc::CudaArch getCudaArch() const;
  }];
}

def Meg_TensorParallelAttr : Meg_Attr<"TensorParallel", "tensor_parallel"> {
  let summary = "Tensor parallelism of a module over a group of mesh axes";
  let description = [{
    The module attribute `meg.tensor_parallel` asks `meg-tensor-parallel` to
    split the layers that record a `#meg.tp_layer` over the ranks of the
    group of `axes` of `mesh` (Megatron's layout). With
    `sequence_parallel`, the activations outside the column/row pairs hold
    this rank's block of the sequence (dim 1 of `[batch, seq, ...]`).

    ```mlir
    module attributes {meg.tensor_parallel = #meg.tensor_parallel<
        mesh = @world, axes = ["tp"], sequence_parallel = true>} { ... }
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        DefaultValuedParameter<"bool", "false">:$sequence_parallel);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_ContextParallelAttr : Meg_Attr<"ContextParallel", "context_parallel"> {
  let summary = "Context parallelism of a module over a group of mesh axes";
  let description = [{
    The module attribute `meg.context_parallel` asks `meg-context-parallel`
    to split every sequence over the ranks of the group of `axes` of `mesh`:
    cut into 2 x C chunks, rank i holds chunks i and 2C - 1 - i (causal load
    balancing). `attention` says how each rank's queries meet the keys of
    the others: `allgather` (the default) gathers the keys and values over
    the group; `ring` passes them around it block by block
    (`meg.ring_attention`), so that a rank never holds more than two
    blocks.

    ```mlir
    module attributes {meg.context_parallel = #meg.context_parallel<
        mesh = @world, axes = ["cp"]>} { ... }
    module attributes {meg.context_parallel = #meg.context_parallel<
        mesh = @world, axes = ["cp"], attention = ring>} { ... }
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
      DefaultValuedParameter<"::mlir::meg::CpAttention",
                             "::mlir::meg::CpAttention::allgather">:$attention);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_PipelineAttr : Meg_Attr<"Pipeline", "pipeline"> {
  let summary = "Pipeline parallelism of a module over a group of mesh axes";
  let description = [{
    The module attribute `meg.pipeline` asks `meg-pipeline-stages` to cut
    the model into `P x virtual_stages` stages at its layers, P the size of
    the group of `axes` of `mesh`; stage s runs on rank s % P of the group
    (chunk s / P of that rank). `layers` gives each stage's number of
    layers, in stage order; without it the pass balances them and records
    its cut here. `schedule` names the order `meg-pipeline-split` runs each
    rank's passes in: `1f1b` (the default), `interleaved` (virtual stages
    > 1) or `zb-h1`.

    ```mlir
    module attributes {meg.pipeline = #meg.pipeline<mesh = @world,
        axes = ["pp"], virtual_stages = 2,
        layers = [3, 2, 2, 3], schedule = "interleaved">} { ... }
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$axes,
                        DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$layers,
                        OptionalParameter<"::mlir::StringAttr">:$schedule);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Meg_TpLayerAttr : Meg_Attr<"TpLayer", "tp_layer"> {
  let summary = "How a layer splits under tensor parallelism";
  let description = [{
    Recorded on a layer's op (`meg.tp_layer`) by whoever builds the model
    (`megc gen`, `megc import`), read by `meg-tensor-parallel`:

    - `column` on a `meg.linear`: the weight `[out, in]` (and bias) split
      along the output features, each rank computing its block of the
      outputs. With `groups = G` the outputs form G blocks that are never
      cut (the heads of a projection): G must be a multiple of the ranks,
      or the ranks a multiple of G, every rank then holding the whole
      weight and computing its group's block, shared by ranks / G ranks.
    - `row` on a `meg.linear`: the weight split along the input features;
      the ranks' partial products are summed.
    - `vocab` on a `meg.embedding`: the table's rows split over the ranks;
      each looks up the ids in its block and the rows are summed.

    ```mlir
    %q = meg.linear %x, %wq {meg.tp_layer = #meg.tp_layer<column, groups = 8>}
        : tensor<2x16x64xf32>, tensor<64x64xf32>
    ```
  }];
  let parameters = (ins "::mlir::meg::TpLayerKind":$kind,
                        DefaultValuedParameter<"int64_t", "0">:$groups);
  let assemblyFormat = "`<` $kind (`,` `groups` `=` $groups^)? `>`";
  let genVerifyDecl = 1;
}

def Meg_StateOfAttr : Meg_Attr<"StateOf", "state_of"> {
  let summary = "The optimizer state a state parameter holds, and for whom";
  let description = [{
    On a `state` meg.param (`meg.state_of`): the parameter holds the
    optimizer state `role` of the trainable parameter `param`: AdamW's first
    (`exp_avg`) or second (`exp_avg_sq`) moment, or the master copy
    (`main_param`) the update works on when the precision policy keeps main
    parameters in another dtype. meg-optimizer records it when it declares
    the state; later passes (meg-fsdp) find a parameter's state through it,
    never through the state's name.

    ```mlir
    meg.param state @optimizer.exp_avg.w : tensor<64xf32> init #meg.init<zeros>
        {meg.state_of = #meg.state_of<exp_avg of @w>}
    ```
  }];
  let parameters = (ins "::mlir::meg::StateRole":$role,
                        "::mlir::FlatSymbolRefAttr":$param);
  let assemblyFormat = "`<` $role `of` $param `>`";
}

#endif // MEGC_DIALECT_MEG_IR_MEGATTRS_TD

//===- MegBase.td - The meg dialect definition -------------*- tablegen -*-===//
//
// The `meg` dialect: transformer training graphs with their parameters,
// optimizer configuration, precision policy and parallelism meshes.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGBASE_TD
#define MEGC_DIALECT_MEG_IR_MEGBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Meg_Dialect : Dialect {
  let name = "meg";
  let cppNamespace = "::mlir::meg";
  let summary = "Transformer training graphs: ops, parameters, optimizer, "
                "precision policy and FSDP/HSDP meshes";
  let description = [{
    The `meg` dialect describes a whole transformer training setup at the
    level a framework exports it: named parameters (`meg.param`, with Hugging
    Face style names), a device mesh with named axes (`meg.mesh`) and the
    groups of axes that collectives may use (`meg.submesh`), forward ops on
    statically shaped tensors, their backward counterparts, the AdamW update,
    collectives and structural regions (fusion and CUDA-graph regions).

    Module-level configuration lives in discardable attributes of the
    `builtin.module`, checked by the dialect:

    ```mlir
    module attributes {
      meg.precision = #meg.precision<param = bf16, main_params = f32,
                                     main_grads = f32, grad_reduce = f32,
                                     exp_avg = f32, exp_avg_sq = f32>,
      meg.optimizer = #meg.adamw<lr = 3.0e-4, beta1 = 0.9, beta2 = 0.95,
                                 eps = 1.0e-8, weight_decay = 0.1>
    } { ... }
    ```

    Arguments and results of entry functions carry their names in a
    `meg.name` attribute (`{meg.name = "input_ids"}`), which become the
    names of the compiled entry point's inputs and outputs.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Names of the module attributes the dialect understands.
    static constexpr ::llvm::StringLiteral kPrecisionAttrName = "meg.precision";
    static constexpr ::llvm::StringLiteral kOptimizerAttrName = "meg.optimizer";
    static constexpr ::llvm::StringLiteral kFsdpAttrName = "meg.fsdp";
    /// The module's #meg.tensor_parallel (meg-tensor-parallel).
    static constexpr ::llvm::StringLiteral kTensorParallelAttrName = "meg.tensor_parallel";
    /// The module's #meg.pipeline (meg-pipeline-stages).
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "meg.pipeline";
    /// On a meg.param: the pipeline stages that hold it (meg-pipeline-stages).
    static constexpr ::llvm::StringLiteral kStagesAttrName = "meg.stages";
    /// On an op: the pipeline stage it runs on. meg-pipeline-stages records
    /// it on the forward's ops, meg-autodiff on each gradient op (its
    /// forward op's stage); meg-pipeline-split reads it.
    static constexpr ::llvm::StringLiteral kStageAttrName = "meg.stage";
    /// On an op meg-autodiff built: part of the backward pass (under a
    /// pipeline, whose schedule runs forward and backward passes apart).
    static constexpr ::llvm::StringLiteral kBackwardAttrName = "meg.backward";
    /// On an op of a training step over micro-batches (under a pipeline):
    /// the micro-batch whose copy of the gradient it belongs to
    /// (meg-optimizer).
    static constexpr ::llvm::StringLiteral kMicroBatchAttrName = "meg.micro_batch";
    /// On an op of a pipeline rank's program: the schedule's pass it runs
    /// in ("forward.mb3", "backward.mb3", or under ZB-H1 "weight.mb3" for
    /// the weight gradients), recorded by meg-pipeline-split.
    static constexpr ::llvm::StringLiteral kPipelinePassAttrName = "meg.pipeline_pass";
    /// On a function meg-pipeline-split made: the entry it is one rank's
    /// program of (a string), and that rank's index in the pipeline group.
    static constexpr ::llvm::StringLiteral kEntryNameAttrName = "meg.entry_name";
    static constexpr ::llvm::StringLiteral kPipelineRankAttrName = "meg.pipeline_rank";
    /// On a meg.param under a pipeline: the rank of the pipeline group
    /// whose program updates it (meg-pipeline-split); checkpoints take it
    /// from there.
    static constexpr ::llvm::StringLiteral kPipelineOwnerAttrName = "meg.pipeline_owner";
    /// The module's #meg.context_parallel (meg-context-parallel).
    static constexpr ::llvm::StringLiteral kContextParallelAttrName = "meg.context_parallel";
    /// On a meg.linear or meg.embedding: its #meg.tp_layer, as the model's
    /// builder records it.
    static constexpr ::llvm::StringLiteral kTpLayerAttrName = "meg.tp_layer";
    /// Micro-batches of one training step (an i64 >= 1): train_step takes
    /// the global batch and accumulates the gradients of its micro-batches.
    static constexpr ::llvm::StringLiteral kMicroBatchesAttrName = "meg.micro_batches";
    /// The #meg.lr_schedule of the training step.
    static constexpr ::llvm::StringLiteral kLrScheduleAttrName = "meg.lr_schedule";
    /// The Hugging Face config.json (a JSON object, as a string) that the
    /// module's model is; checkpoints in Hugging Face layout carry it.
    static constexpr ::llvm::StringLiteral kHfConfigAttrName = "meg.hf_config";
    /// Names an entry point's argument or result (`input_ids`, `logits`).
    static constexpr ::llvm::StringLiteral kNameAttrName = "meg.name";
    /// The module's #meg.target: the device its kernels are for.
    static constexpr ::llvm::StringLiteral kTargetAttrName = "meg.target";
    /// A kernel function's #meg.kernel_strategy.
    static constexpr ::llvm::StringLiteral kKernelStrategyAttrName =
        "meg.kernel_strategy";
    /// On a kernel function: per result, the argument it overwrites (an
    /// optimizer's update of its state), or -1.
    static constexpr ::llvm::StringLiteral kInPlaceAttrName = "meg.in_place";
    /// On a state meg.param: its values are never negative (a second
    /// moment, a step count), which loading checks.
    static constexpr ::llvm::StringLiteral kNonNegativeAttrName = "meg.non_negative";
    /// On an op: the transformer layer (0, 1, ...) whose forward it is part
    /// of, as the model's builder (megc gen, megc import) records it.
    /// On a meg.param, the layer it belongs to (set by the same builder).
    /// Both are the only source of layer extents: meg-remat's recompute
    /// units, meg-fsdp's gather units, meg-outline-cuda-graphs' layer
    /// graphs. IR without it has no layers (each parameter is its own
    /// gather unit, no layer graphs, nothing for meg-remat to recompute).
    static constexpr ::llvm::StringLiteral kLayerAttrName = "meg.layer";
    /// On a function result: the trainable meg.param (a symbol) whose
    /// gradient the result is; meg-autodiff records it.
    static constexpr ::llvm::StringLiteral kGradOfAttrName = "meg.grad_of";
    /// On a state meg.param: a #meg.state_of saying which optimizer state
    /// of which parameter it holds; meg-optimizer records it.
    static constexpr ::llvm::StringLiteral kStateOfAttrName = "meg.state_of";
    /// On an op: the chunk of tokens (0, 1, ...) of the final norm, LM head
    /// and cross-entropy it computes, as meg-chunk-loss splits them; the
    /// backward recomputes each chunk (meg-remat).
    static constexpr ::llvm::StringLiteral kLossChunkAttrName = "meg.loss_chunk";
    /// On an op: a recomputation meg-remat inserted in the backward.
    static constexpr ::llvm::StringLiteral kRecomputedAttrName = "meg.recomputed";
    /// On a function meg-remat fitted into a memory budget: [steps taken,
    /// steps of its ladder].
    static constexpr ::llvm::StringLiteral kRematStepsAttrName = "meg.remat_steps";
    /// On a linalg.generic of a kernel (meg-online-softmax): its two
    /// outputs are a row's running maximum and its sum of exponentials
    /// relative to that maximum, reduced in one pass; a GPU mapping combines
    /// the pairs of its threads with the same rescaling.
    static constexpr ::llvm::StringLiteral kOnlineSoftmaxAttrName = "meg.online_softmax";

  private:
    void registerAttributes();
    void registerTypes();
  public:
  }];
}

class Meg_Op<string mnemonic, list<Trait> traits = []>
    : Op<Meg_Dialect, mnemonic, traits>;

// Op classes, as traits (C++ in MegTraits.h). Passes ask for a class with
// `op->hasTrait<meg::Pointwise>()`, never with a list of ops.

// Each result element is computed from operand elements at indices that
// are a projection of its own (the operands broadcast, in any way), with no
// reduction: the ops a loop fusion may put in one kernel.
def Meg_Pointwise : NativeOpTrait<"Pointwise"> {
  let cppNamespace = "::mlir::meg";
}
// Pointwise with NumPy broadcasting (trailing dimensions aligned, a
// dimension of size 1 stretches): a value split along a dimension gives a
// result split along the aligned one, which tensor parallelism relies on.
// Every elementwise op is pointwise (the list Meg_ElementwiseTraits).
def Meg_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::mlir::meg";
}
defvar Meg_ElementwiseTraits = [Meg_Pointwise, Meg_Elementwise];
// Reduces along one dimension, independently at each index of the others:
// its kernel is a loop over rows, and a fusion may hold one of them with
// pointwise work around it.
def Meg_RowReduction : NativeOpTrait<"RowReduction"> {
  let cppNamespace = "::mlir::meg";
}
// A product of matrices (a GEMM on a device): selective recomputation
// keeps its results and recomputes the cheaper work between them.
def Meg_MatrixProduct : NativeOpTrait<"MatrixProduct"> {
  let cppNamespace = "::mlir::meg";
}

// Tensor constraints used across the dialect.
def Meg_FloatElement : AnyTypeOf<[F32, BF16, F16]>;
def Meg_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Meg_IndexTensor : RankedTensorOf<[I32, I64]>;
def Meg_Tensor : RankedTensorOf<[F32, BF16, F16, I32, I64]>;
def Meg_ScalarF32 : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
def Meg_StepTensor : 0DTensorOf<[I64]>;
def Meg_ScalarI32 : 0DTensorOf<[I32]>;

#endif // MEGC_DIALECT_MEG_IR_MEGBASE_TD

//===- MegModuleOps.td - parameters and meshes -------------*- tablegen -*-===//
//
// Module-level symbols: parameters, meshes and submesh registrations, and
// the op that reads a parameter inside a function.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGMODULEOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGMODULEOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def Meg_ParamOp : Meg_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A named model parameter";
  let description = [{
    Declares a parameter of the model with its Hugging Face style name, its
    type, how it is initialised and, optionally, how it is sharded. A
    parameter is trainable unless marked `frozen`; frozen parameters get no
    gradient and no optimizer state. A `state` parameter is training state
    (optimizer moments, step count) that meg-optimizer adds: persistent like
    a weight, never trained, and not part of model checkpoints.
    `aliases` are other names checkpoints may hold the parameter under (a
    tied `lm_head.weight` is `model.embed_tokens.weight`); no parameter may
    be named like another's alias. `parts` says that checkpoints hold the
    parameter as that many tensors, its slices along dimension 0 in order
    (each of the parameter's full shape without that dimension): the
    experts of an MoE layer stacked into one tensor, which Hugging Face
    checkpoints keep one per expert.

    ```mlir
    meg.param @model.layers.0.self_attn.q_proj.weight : tensor<4096x4096xbf16>
        init #meg.init<normal(0.02)>
    meg.param frozen @model.norm.weight : tensor<4096xbf16> init #meg.init<ones>
    meg.param @model.embed_tokens.weight : tensor<151936x1024xbf16>
        init #meg.init<normal(0.02)> aliases ["lm_head.weight"]
    meg.param @model.layers.1.mlp.experts.up_proj.weight : tensor<2x64x32xf32>
        init #meg.init<normal(0.02)>
        parts ["model.layers.1.mlp.experts.0.up_proj.weight",
               "model.layers.1.mlp.experts.1.up_proj.weight"]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Meg_FloatTensor>:$type,
                       Meg_InitAttr:$init,
                       UnitAttr:$frozen, UnitAttr:$state,
                       OptionalAttr<Meg_ShardingAttr>:$sharding,
                       OptionalAttr<StrArrayAttr>:$aliases,
                       OptionalAttr<StrArrayAttr>:$parts);
  let assemblyFormat = [{
    (`frozen` $frozen^)? (`state` $state^)? $sym_name `:` $type `init` qualified($init)
    (`sharding` qualified($sharding)^)? (`aliases` $aliases^)?
    (`parts` $parts^)? attr-dict
  }];
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    bool isTrainable() { return !getFrozen() && !getState(); }
    /// The shape of the whole parameter: its type's shape, or for a sharded
    /// parameter the shape it is a piece of.
    ::llvm::SmallVector<int64_t> getFullShape();
    /// The transformer layer the parameter belongs to (`meg.layer`), if
    /// its builder recorded one.
    std::optional<int64_t> getLayer();
    /// For optimizer state: which state of which parameter it holds
    /// (`meg.state_of`), or null.
    StateOfAttr getStateOf();
  }];
  let hasVerifier = 1;
}

def Meg_ParamRefOp : Meg_Op<"param_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads a parameter by symbol";
  let description = [{
    Yields the current value of the `meg.param` named by `name`; the result
    type must be the parameter's type.

    ```mlir
    %w = meg.param_ref @model.norm.weight : tensor<4096xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Meg_ResourceParams : Resource<"::mlir::meg::ParamResource">;

def Meg_ParamStoreOp : Meg_Op<"param_store", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<Meg_ResourceParams>]>]> {
  let summary = "Writes a new value to a parameter";
  let description = [{
    Replaces the persistent value of the `meg.param` named by `name` (a
    weight after an optimizer step, or training state). Reads of the
    parameter in the same function see the old value; the stores take
    effect when the function ends.

    ```mlir
    meg.param_store @model.norm.weight, %new : tensor<4096xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, Meg_FloatTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

def Meg_MeshOp : Meg_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A device mesh with named axes";
  let description = [{
    Declares the devices of a run as a mesh whose axes have names and sizes;
    the world size is their product. The order of the axes is the order of
    the rank layout (the last axis varies fastest).

    ```mlir
    meg.mesh @world [dp_outer = 2, dp_shard = 4, tp = 1]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $axis_sizes) attr-dict
  }];
  let extraClassDeclaration = [{
    /// Size of the named axis, or std::nullopt if the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// Number of devices in the mesh.
    int64_t getNumDevices();
  }];
  let hasVerifier = 1;
}

def Meg_SubmeshOp : Meg_Op<"submesh", [HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Registers a group of mesh axes for collectives";
  let description = [{
    Registers the group formed by the given axes of a mesh (flattened in the
    order written). Collectives may only communicate over registered groups,
    so a missing registration is a compile-time error instead of a failure
    at run time; the runtime creates one communicator per registration.

    ```mlir
    meg.submesh @world[dp_outer, dp_shard]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let assemblyFormat = "$mesh `` custom<AxisList>($axes) attr-dict";
  let extraClassDeclaration = [{
    /// Checks that `axes` of `mesh` form a group registered in the module of
    /// `user`, reporting on `user` otherwise; returns the group size.
    static ::mlir::FailureOr<int64_t>
    verifyGroup(::mlir::Operation *user,
                ::mlir::SymbolTableCollection &symbolTable,
                ::mlir::FlatSymbolRefAttr mesh, ::mlir::ArrayAttr axes);
  }];
}

#endif // MEGC_DIALECT_MEG_IR_MEGMODULEOPS_TD

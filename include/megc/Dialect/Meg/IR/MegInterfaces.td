//===- MegInterfaces.td - meg op interfaces ----------------*- tablegen -*-===//
//
// The interface through which each differentiable op declares its
// vector-Jacobian product for meg-autodiff, and the one every collective
// (blocking or started) implements.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGINTERFACES_TD
#define MEGC_DIALECT_MEG_IR_MEGINTERFACES_TD

include "mlir/IR/OpBase.td"

def Meg_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    An op whose vector-Jacobian product meg-autodiff can build. Given the
    gradient of the loss with respect to each result (a null Value where a
    result does not reach the loss), `buildVJP` emits ops at the builder's
    insertion point and returns the gradient with respect to each operand,
    in operand order, with each operand's type; a null Value marks an
    operand that gets no gradient (integer ids, cos/sin tables, labels).
    It returns failure, with a diagnostic on the op, when the product is
    not defined (e.g. `meg.reduce max`).
  }];
  let cppNamespace = "::mlir::meg";
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads)>
  ];
}

def Meg_VJP : DeclareOpInterfaceMethods<Meg_DifferentiableOpInterface>;

def Meg_TensorParallelOpInterface : OpInterface<"TensorParallelOpInterface"> {
  let description = [{
    An op's sharding rule for `meg-tensor-parallel`: given the layouts of
    its operands over the tensor-parallel group (`TpLayout`, through the
    pass's `TensorParallelRewriter`), it gives its results their layouts,
    inserting the collectives it needs (gathering an operand whole, taking
    this rank's block, completing a partial sum) or rewriting itself (a
    row-parallel layer, a vocab-parallel loss). The pass calls it only when
    an operand is split or the op records a `#meg.tp_layer`. Ops with the
    `Elementwise` trait share one rule in the pass; any other op runs on
    whole values (its split operands gathered).
  }];
  let cppNamespace = "::mlir::meg";
  let methods = [
    InterfaceMethod<
      "Lays the op out over the group from its operands' layouts.",
      "::llvm::LogicalResult", "layOutOverTensorParallelGroup",
      (ins "::mlir::meg::TensorParallelRewriter &":$rewriter)>
  ];
}

def Meg_TP : DeclareOpInterfaceMethods<Meg_TensorParallelOpInterface>;

def Meg_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let description = [{
    A collective over a group of a mesh (`mesh` and `axes` attributes): the
    blocking ones yield the tensor they produce, the started ones
    (`*_start`) a `!meg.future` that `meg.wait` resolves. The program
    lowering, the CUDA-graph outlining, the conversion to linalg and the
    update scheduling treat every collective through this interface.
  }];
  let cppNamespace = "::mlir::meg";
  let methods = [
    InterfaceMethod<
      "The tensor type the collective produces (for a started one, the type "
      "its future resolves to).",
      "::mlir::RankedTensorType", "getProducedType", (ins)>,
    InterfaceMethod<
      "Whether the collective is started and waited for apart.",
      "bool", "isStarted", (ins), [{}], [{
        return ::llvm::isa<::mlir::meg::FutureType>(
            $_op->getResult(0).getType());
      }]>,
    InterfaceMethod<
      "Whether a blocking collective has a started form (`*_start`), which "
      "meg-async-collectives may split it into.",
      "bool", "hasStartedForm", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "Creates the started form of this blocking collective at the "
      "builder's point, with its operands and attributes, and returns its "
      "`!meg.future` (only where hasStartedForm holds).",
      "::mlir::Value", "buildStart", (ins "::mlir::OpBuilder &":$builder),
      [{}], [{ return {}; }]>
  ];
}

#endif // MEGC_DIALECT_MEG_IR_MEGINTERFACES_TD

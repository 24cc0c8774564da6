//===- MegTypes.td - meg types -----------------------------*- tablegen -*-===//
//
// Types of the meg dialect: the handle of an asynchronous collective.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGTYPES_TD
#define MEGC_DIALECT_MEG_IR_MEGTYPES_TD

include "megc/Dialect/Meg/IR/MegBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

def Meg_FutureType : TypeDef<Meg_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "The pending result of an asynchronous collective";
  let description = [{
    Returned by the `*_start` collectives and consumed by `meg.wait`, which
    yields the tensor. Work between the two may overlap the communication.

    ```mlir
    !meg.future<tensor<4096x4096xbf16>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // MEGC_DIALECT_MEG_IR_MEGTYPES_TD

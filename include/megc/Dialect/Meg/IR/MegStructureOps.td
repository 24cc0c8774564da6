//===- MegStructureOps.td - fusion and graph regions -------*- tablegen -*-===//
//
// Region ops that group work: fusion regions (one kernel each) and graph
// regions (captured once as a CUDA graph, replayed afterwards).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGSTRUCTUREOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGSTRUCTUREOPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Meg_FusionOp : Meg_Op<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::mlir::meg::YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "A group of ops compiled into one kernel";
  let description = [{
    The body receives the inputs as block arguments and yields the results;
    it is isolated from above so that it can be outlined into a kernel.

    ```mlir
    %y = meg.fusion (%x, %r) : (tensor<16x64xf32>, tensor<16x64xf32>)
        -> tensor<16x64xf32> {
    ^bb0(%a: tensor<16x64xf32>, %b: tensor<16x64xf32>):
      %s = meg.add %a, %b : tensor<16x64xf32>, tensor<16x64xf32>
      meg.yield %s : tensor<16x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
}

def Meg_GraphRegionOp : Meg_Op<"graph_region", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::mlir::meg::YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "A region captured once as a CUDA graph and replayed";
  let description = [{
    Groups work with static shapes and no host synchronisation. `name` labels
    the region (e.g. `layers.3.forward`); `share_io` chains its output buffer
    to the input buffer of the next region of the same kind; `forward_only`
    marks the forward graph of a frozen layer (no backward graph).

    ```mlir
    %h2 = meg.graph_region "layers.0.forward" share_io (%h)
        : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
    ^bb0(%x: tensor<2x16x64xf32>):
      %y = meg.silu %x : tensor<2x16x64xf32>
      meg.yield %y : tensor<2x16x64xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$share_io,
                       UnitAttr:$forward_only,
                       Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name (`share_io` $share_io^)? (`forward_only` $forward_only^)?
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
}

def Meg_YieldOp : Meg_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["FusionOp", "GraphRegionOp"]>]> {
  let summary = "Yields the results of a fusion or graph region";
  let description = [{
    ```mlir
    meg.yield %a, %b : tensor<16x64xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // MEGC_DIALECT_MEG_IR_MEGSTRUCTUREOPS_TD

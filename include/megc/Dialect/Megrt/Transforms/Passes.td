//===- Passes.td - megrt dialect passes -------------------*- tablegen -*-===//
//
// The passes over the executable program.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_TD
#define MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegrtPlanMemory : Pass<"megrt-plan-memory", "::megc::rt::EntryOp"> {
  let summary = "Places the entry's arena buffers from the commands' "
                "memory effects";
  let description = [{
    Each arena buffer lives from the first command that reads or writes it
    (an operand with a memory effect on it, or on a `megrt.view` of it) to
    the last; buffers are placed largest first at the lowest 64-byte aligned
    offset that overlaps no placed buffer with an intersecting lifetime, and
    get it as `offset`. The entry gets the plan's figures: `arena_bytes`,
    `peak_bytes` (the most bytes live at one command, a lower bound of the
    arena), `unplanned_bytes` (every intermediate's bytes: the arena
    without reuse) and, with a `loss_output`, `live_at_loss_bytes` (what is
    live when the loss is first written, a copy or collective into it
    followed back to its source: in a step of one micro-batch, what the
    forward keeps for the backward).

    Parameters, inputs and outputs are the caller's storage, not placed.
    `megc` runs the pass on every entry it compiles.

    ```mlir
    megrt.entry @f {
      %a = megrt.arena : !megrt.buffer<tensor<16xf32>>
      %b = megrt.arena : !megrt.buffer<tensor<16xf32>>
      megrt.launch @k0(%a) : !megrt.buffer<tensor<16xf32>>
      megrt.launch @k1(%a, %b) : !megrt.buffer<tensor<16xf32>>,
                                 !megrt.buffer<tensor<16xf32>>
      megrt.launch @k2(%b) : !megrt.buffer<tensor<16xf32>>
    }
    ```
    places `%a` at 0 and `%b` at 64: both are live at the second command.
  }];
}

#endif // MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_TD

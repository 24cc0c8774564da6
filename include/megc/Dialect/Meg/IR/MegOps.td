//===- MegOps.td - All meg operations ----------------------*- tablegen -*-===//
//
// Aggregates the op definitions of the meg dialect, grouped by topic.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGOPS_TD
#define MEGC_DIALECT_MEG_IR_MEGOPS_TD

include "megc/Dialect/Meg/IR/MegBase.td"
include "megc/Dialect/Meg/IR/MegAttrs.td"
include "megc/Dialect/Meg/IR/MegTypes.td"
include "megc/Dialect/Meg/IR/MegModuleOps.td"
include "megc/Dialect/Meg/IR/MegTensorOps.td"
include "megc/Dialect/Meg/IR/MegNNOps.td"
include "megc/Dialect/Meg/IR/MegGradOps.td"
include "megc/Dialect/Meg/IR/MegOptimizerOps.td"
include "megc/Dialect/Meg/IR/MegCollectiveOps.td"
include "megc/Dialect/Meg/IR/MegMoeOps.td"
include "megc/Dialect/Meg/IR/MegStructureOps.td"

#endif // MEGC_DIALECT_MEG_IR_MEGOPS_TD

//===- PipelinePass.h - the record of a pipeline schedule's pass -*- C++
//-*-===//
//
// meg-pipeline-split records on each op of a rank's program the pass of the
// schedule it runs in, `meg.pipeline_pass = "forward.mb3"` (forward,
// backward, or weight under zero-bubble schedules, of micro-batch 3). This
// is the one place that writes and reads that text; the dialect's verifier
// refuses a record it cannot read.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_PIPELINEPASS_H
#define MEGC_DIALECT_MEG_IR_PIPELINEPASS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace mlir::meg {

struct PipelinePass {
  enum Kind { Forward, Backward, Weight } kind;
  int64_t microBatch;
};

/// The record's text: "forward.mbI", "backward.mbI", "weight.mbI".
StringAttr pipelinePassAttr(Builder &builder, PipelinePass pass);

/// The pass a record names; none if the text is not a record.
std::optional<PipelinePass> parsePipelinePass(StringRef text);

/// The pass `op` records; none without (or with an unreadable) record.
std::optional<PipelinePass> pipelinePassOf(Operation *op);

} // namespace mlir::meg

#endif // MEGC_DIALECT_MEG_IR_PIPELINEPASS_H

//===- PipelinePass.cpp - the record of a pipeline schedule's pass --------===//

#include "megc/Dialect/Meg/IR/PipelinePass.h"
#include "megc/Dialect/Meg/IR/MegDialect.h"

namespace mlir::meg {

namespace {
constexpr StringLiteral kKindNames[] = {"forward", "backward", "weight"};
} // namespace

StringAttr pipelinePassAttr(Builder &builder, PipelinePass pass) {
  return builder.getStringAttr(Twine(kKindNames[pass.kind]) + ".mb" +
                               Twine(pass.microBatch));
}

std::optional<PipelinePass> parsePipelinePass(StringRef text) {
  auto [kind, rest] = text.split('.');
  for (auto [index, name] : llvm::enumerate(kKindNames)) {
    if (kind != name || !rest.consume_front("mb"))
      continue;
    int64_t microBatch;
    if (rest.empty() || rest.getAsInteger(10, microBatch) || microBatch < 0)
      return std::nullopt;
    return PipelinePass{static_cast<PipelinePass::Kind>(index), microBatch};
  }
  return std::nullopt;
}

std::optional<PipelinePass> pipelinePassOf(Operation *op) {
  auto text = op->getAttrOfType<StringAttr>(MegDialect::kPipelinePassAttrName);
  if (!text)
    return std::nullopt;
  return parsePipelinePass(text.getValue());
}

} // namespace mlir::meg

//===- TensorSizes.cpp - sizes of tensors, checked for overflow --------===//

#include "megc/Dialect/Meg/IR/TensorSizes.h"

#include "ShapeUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace mlir::meg;

std::optional<uint64_t> mlir::meg::checkedElements(ArrayRef<int64_t> shape) {
  uint64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    std::optional<uint64_t> next =
        llvm::checkedMulUnsigned(elements, static_cast<uint64_t>(dim));
    if (!next)
      return std::nullopt;
    elements = *next;
  }
  return elements;
}

std::optional<uint64_t> mlir::meg::checkedBytes(ArrayRef<int64_t> shape,
                                                unsigned elementBits) {
  std::optional<uint64_t> elements = checkedElements(shape);
  if (!elements)
    return std::nullopt;
  return llvm::checkedMulUnsigned(*elements,
                                  std::max<uint64_t>(1, (elementBits + 7) / 8));
}

std::string mlir::meg::tensorSizeProblem(ArrayRef<int64_t> shape,
                                         unsigned elementBits) {
  std::optional<uint64_t> bytes = checkedBytes(shape, elementBits);
  if (bytes && *bytes <= kMaxTensorBytes)
    return "";
  return "has shape " + formatShape(shape) +
         ", whose size in bytes exceeds 2^48 (256 TiB), the most a tensor "
         "may have: no device holds it and its offsets could overflow";
}

LogicalResult mlir::meg::verifyTensorSizes(Operation *root) {
  auto check = [](Type type, Operation *op, StringRef what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return success();
    unsigned bits = tensor.getElementType().isIntOrFloat()
                        ? tensor.getElementTypeBitWidth()
                        : 64;
    std::string problem = tensorSizeProblem(tensor.getShape(), bits);
    if (problem.empty())
      return success();
    return op->emitError() << what << " " << tensor << " " << problem;
  };
  // Outer ops first: a function's arguments before its body.
  WalkResult result = root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    for (Value value : op->getResults())
      if (failed(check(value.getType(), op, "result")))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (failed(check(arg.getType(), op, "argument")))
            return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult mlir::meg::verifyLiterals(Operation *root) {
  WalkResult result = root->walk([&](arith::ConstantOp constant) {
    Attribute value = constant.getValue();
    auto report = [&](const APFloat &element, uint64_t index, Type type) {
      SmallString<16> text;
      element.toString(text);
      constant.emitError() << "literal element " << index << " is " << text
                           << " in " << type
                           << ": the value does not fit its type (a literal "
                              "beyond the type's range becomes infinity)";
      return WalkResult::interrupt();
    };
    if (auto scalar = dyn_cast<FloatAttr>(value)) {
      if (!scalar.getValue().isFinite())
        return report(scalar.getValue(), 0, scalar.getType());
    } else if (auto dense = dyn_cast<DenseFPElementsAttr>(value)) {
      uint64_t index = 0;
      for (const APFloat &element : dense.getValues<APFloat>()) {
        if (!element.isFinite())
          return report(element, index, dense.getElementType());
        if (dense.isSplat())
          break;
        ++index;
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

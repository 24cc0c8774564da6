//===- ShapeUtils.cpp - shape helpers for meg verifiers ----------------===//
//
// Shape printing, broadcasting and dtype helpers used by op verification.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::meg {

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

LogicalResult inferError(std::optional<Location> loc, llvm::StringRef opName,
                         const llvm::Twine &message) {
  return emitOptionalError(loc, "'", opName, "' op ", message.str());
}

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  llvm::SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return std::nullopt;
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to) {
  auto shape = broadcastShapes(from, to);
  return shape && llvm::ArrayRef<int64_t>(*shape) == to;
}

bool isExactFloatWidening(Type from, Type to) {
  if (from == to)
    return true;
  return (from.isBF16() || from.isF16()) && to.isF32();
}

} // namespace mlir::meg

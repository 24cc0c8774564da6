//===- Summarize.cpp - the meg-summarize pass --------------------------===//
//
// Reports parameters, meshes, configuration and op counts of a meg module.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGSUMMARIZE
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// The architecture a verified meg.hf_config names, or "(no architecture)".
std::string hfArchitecture(StringAttr config) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(config);
  if (!value) {
    llvm::consumeError(value.takeError());
    return "(invalid)";
  }
  const llvm::json::Object *object = value->getAsObject();
  const llvm::json::Array *list =
      object ? object->getArray("architectures") : nullptr;
  if (list && !list->empty())
    if (std::optional<StringRef> name = (*list)[0].getAsString())
      return name->str();
  return "(no architecture)";
}


/// Bytes of one element of a parameter's element type.
int64_t elementBytes(Type type) {
  return std::max<int64_t>(1, type.getIntOrFloatBitWidth() / 8);
}

struct ParamTotals {
  int64_t tensors = 0, elements = 0, bytes = 0, trainable = 0, frozen = 0;
};

void printGroup(raw_ostream &os, FlatSymbolRefAttr mesh, ArrayAttr axes) {
  os << mesh << "[";
  llvm::interleaveComma(axes, os, [&](Attribute axis) {
    os << cast<StringAttr>(axis).getValue();
  });
  os << "]";
}

struct MegSummarizePass
    : public mlir::meg::impl::MegSummarizeBase<MegSummarizePass> {
  using MegSummarizeBase::MegSummarizeBase;

  void runOnOperation() override {
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError() << "meg-summarize: " << error;
      return signalPassFailure();
    }
    summarize(file->os());
    file->keep();
    markAllAnalysesPreserved();
  }

  void summarize(raw_ostream &os) {
    ModuleOp module = getOperation();
    ParamTotals totals;
    for (ParamOp param : module.getOps<ParamOp>()) {
      RankedTensorType type = param.getTensorType();
      ++totals.tensors;
      totals.elements += type.getNumElements();
      totals.bytes += type.getNumElements() * elementBytes(type.getElementType());
      ++(param.isTrainable() ? totals.trainable : totals.frozen);
    }
    os << "meg model summary\n";
    os << llvm::format("  parameters: %lld tensors, %.2f M elements, %.1f MB "
                       "(trainable %lld, frozen %lld)\n",
                       static_cast<long long>(totals.tensors),
                       totals.elements / 1e6, totals.bytes / 1e6,
                       static_cast<long long>(totals.trainable),
                       static_cast<long long>(totals.frozen));
    for (MeshOp mesh : module.getOps<MeshOp>()) {
      os << "  mesh @" << mesh.getSymName() << ": " << mesh.getNumDevices()
         << " devices [";
      llvm::interleaveComma(
          llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()), os,
          [&](auto axis) {
            os << cast<StringAttr>(std::get<0>(axis)).getValue() << " = "
               << std::get<1>(axis);
          });
      os << "]\n";
    }
    for (SubmeshOp submesh : module.getOps<SubmeshOp>()) {
      os << "  submesh ";
      printGroup(os, submesh.getMeshAttr(), submesh.getAxesAttr());
      os << "\n";
    }
    for (NamedAttribute attr : module->getAttrs()) {
      StringRef name = attr.getName().getValue();
      if (name == MegDialect::kHfConfigAttrName)
        os << "  " << name << ": "
           << hfArchitecture(cast<StringAttr>(attr.getValue()))
           << " (Hugging Face config)\n";
      else if (name.starts_with("meg."))
        os << "  " << name << " = " << attr.getValue() << "\n";
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      llvm::MapVector<StringRef, int64_t> counts;
      int64_t total = 0;
      func.walk([&](Operation *op) {
        if (op == func.getOperation())
          return;
        ++counts[op->getName().getStringRef()];
        ++total;
      });
      os << "  func @" << func.getSymName() << ": " << total << " ops\n";
      SmallVector<std::pair<StringRef, int64_t>> sorted(counts.begin(),
                                                        counts.end());
      llvm::stable_sort(sorted, [](auto &a, auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
      for (auto [name, count] : sorted)
        os << "    " << name << " " << count << "\n";
    }
  }
};

} // namespace

//===- OutlineCpuDispatches.cpp - one function per dispatch ------------===//
//
// meg-outline-cpu-dispatches: the body of every top-level scf.forall of a
// kernel becomes `<kernel>_d<N>(buffers..., %workgroup)`, the buffers
// being the kernel arguments and temporaries it uses; constants, globals
// and views are rebuilt inside, so that every argument is a whole buffer.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace megc {
#define GEN_PASS_DEF_MEGOUTLINECPUDISPATCHES
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Values a dispatch function rebuilds rather than takes: constants,
/// globals and views of what it takes.
bool rebuilt(Value value) {
  Operation *def = value.getDefiningOp();
  return def && (def->hasTrait<OpTrait::ConstantLike>() ||
                 isa<memref::GetGlobalOp, ViewLikeOpInterface>(def));
}

class DispatchOutliner {
public:
  DispatchOutliner(func::FuncOp kernel, ModuleOp module)
      : kernel(kernel), module(module), builder(kernel.getContext()) {}

  void run() {
    unsigned index = 0;
    for (auto forall : llvm::make_early_inc_range(
             kernel.getBody().front().getOps<scf::ForallOp>()))
      outline(forall, index++);
  }

private:
  /// Adds the buffers `value` derives from to `params`, and the ops that
  /// derive it to `derivations` (in def-before-use order).
  void collect(Value value, llvm::SetVector<Value> &params,
               llvm::SetVector<Operation *> &derivations) {
    if (!rebuilt(value)) {
      params.insert(value);
      return;
    }
    Operation *def = value.getDefiningOp();
    for (Value operand : def->getOperands())
      collect(operand, params, derivations);
    derivations.insert(def);
  }

  void outline(scf::ForallOp forall, unsigned index) {
    llvm::SetVector<Value> params;
    llvm::SetVector<Operation *> derivations;
    forall.getBody()->walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (!forall->isAncestor(operand.getParentRegion()->getParentOp()))
          collect(operand, params, derivations);
    });

    SmallVector<Type> types;
    for (Value param : params)
      types.push_back(param.getType());
    types.push_back(builder.getIndexType());
    builder.setInsertionPointAfter(kernel);
    std::string name = (kernel.getName() + "_d" + Twine(index)).str();
    auto function = func::FuncOp::create(builder, forall.getLoc(), name,
                                         builder.getFunctionType(types, {}));
    for (auto [position, param] : llvm::enumerate(params))
      if (isa<MemRefType>(param.getType()))
        function.setArgAttr(position, LLVM::LLVMDialect::getNoAliasAttrName(),
                            builder.getUnitAttr());
    Block *entry = function.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    IRMapping mapping;
    for (auto [param, arg] : llvm::zip(params, entry->getArguments()))
      mapping.map(param, arg);
    mapping.map(forall.getInductionVar(0), entry->getArguments().back());
    for (Operation *op : derivations)
      builder.clone(*op, mapping);
    for (Operation &op : forall.getBody()->without_terminator())
      builder.clone(op, mapping);
    func::ReturnOp::create(builder, forall.getLoc());

    // The forall now only names its dispatch function.
    Block *body = forall.getBody();
    SmallVector<Operation *> moved;
    for (Operation &op : body->without_terminator())
      moved.push_back(&op);
    for (Operation *op : llvm::reverse(moved))
      op->erase();
    builder.setInsertionPoint(body->getTerminator());
    SmallVector<Value> operands(params.begin(), params.end());
    operands.push_back(forall.getInductionVar(0));
    func::CallOp::create(builder, forall.getLoc(), function, operands);
  }

  func::FuncOp kernel;
  ModuleOp module;
  OpBuilder builder;
};

struct MegOutlineCpuDispatchesPass
    : public impl::MegOutlineCpuDispatchesBase<MegOutlineCpuDispatchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto kernel : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (kernel->hasAttr(meg::MegDialect::kKernelStrategyAttrName))
        DispatchOutliner(kernel, module).run();
  }
};

} // namespace
} // namespace megc

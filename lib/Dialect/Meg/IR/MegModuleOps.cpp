//===- MegModuleOps.cpp - parameters and meshes ------------------------===//
//
// Verification of parameters, meshes, submesh registrations and parameter
// references, and the group check used by every collective.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/TensorSizes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::meg;

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  std::string problem =
      tensorSizeProblem(getFullShape(), type.getElementTypeBitWidth());
  if (!problem.empty())
    return emitOpError() << problem;
  if (getFrozen() && getState())
    return emitOpError() << "cannot be both frozen and training state";
  if (ArrayAttr parts = getPartsAttr()) {
    SmallVector<int64_t> full = getFullShape();
    if (getState())
      return emitOpError() << "is training state, which checkpoints hold "
                              "whole, so it cannot have parts";
    if (full.empty() || full.front() != static_cast<int64_t>(parts.size()))
      return emitOpError() << "has " << parts.size()
                           << " parts, which must be the slices along dim 0 "
                              "of its "
                           << formatShape(full) << " shape";
    llvm::StringSet<> seen;
    for (Attribute attr : parts) {
      StringRef part = cast<StringAttr>(attr).getValue();
      if (part.empty() || part == getSymName() || !seen.insert(part).second)
        return emitOpError() << "part '" << part
                             << "' must be a non-empty name, other than the "
                                "parameter's own and the other parts'";
    }
  }
  ShardingAttr sharding = getShardingAttr();
  if (sharding && sharding.isFlat() && type.getRank() != 1)
    return emitOpError() << "is sharded, so its type must be the 1-D piece "
                            "of one rank, got "
                         << type;
  if (sharding && !sharding.isFlat() &&
      type.getRank() != static_cast<int64_t>(sharding.getShape().size()))
    return emitOpError() << "is a block of a "
                         << formatShape(sharding.getShape())
                         << " tensor, so its type must have that rank, got "
                         << type;
  return success();
}

SmallVector<int64_t> ParamOp::getFullShape() {
  if (ShardingAttr sharding = getShardingAttr())
    return llvm::to_vector(sharding.getShape());
  return llvm::to_vector(getTensorType().getShape());
}

std::optional<int64_t> ParamOp::getLayer() {
  if (auto layer =
          (*this)->getAttrOfType<IntegerAttr>(MegDialect::kLayerAttrName))
    return layer.getInt();
  return std::nullopt;
}

StateOfAttr ParamOp::getStateOf() {
  return (*this)->getAttrOfType<StateOfAttr>(MegDialect::kStateOfAttrName);
}

ParamOp mlir::meg::gradientParam(FunctionOpInterface func, unsigned index) {
  auto param = func.getResultAttrOfType<FlatSymbolRefAttr>(
      index, MegDialect::kGradOfAttrName);
  if (!param)
    return {};
  return SymbolTable::lookupNearestSymbolFrom<ParamOp>(func, param);
}

void mlir::meg::setGradientParam(FunctionOpInterface func, unsigned index,
                                 ParamOp param) {
  func.setResultAttr(index, MegDialect::kGradOfAttrName,
                     FlatSymbolRefAttr::get(param));
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (StateOfAttr stateOf = getStateOf()) {
    auto owner =
        symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, stateOf.getParam());
    if (!getState() || !owner || !owner.isTrainable())
      return emitOpError() << "'" << MegDialect::kStateOfAttrName
                           << "' must be on a state parameter and name a "
                              "trainable meg.param, not "
                           << stateOf.getParam();
  }
  if (ArrayAttr aliases = getAliasesAttr()) {
    for (Attribute attr : aliases) {
      StringRef alias = cast<StringAttr>(attr).getValue();
      if (alias.empty() || alias == getSymName())
        return emitOpError() << "alias '" << alias
                             << "' must be a non-empty name other than the "
                                "parameter's own";
      if (symbolTable.lookupNearestSymbolFrom(
              *this, StringAttr::get(getContext(), alias)))
        return emitOpError() << "alias '" << alias
                             << "' is the name of another symbol";
    }
    for (ParamOp other :
         cast<ModuleOp>(getOperation()->getParentOp()).getOps<ParamOp>()) {
      if (other == *this || !other.getAliasesAttr())
        continue;
      for (Attribute attr : aliases)
        if (llvm::is_contained(other.getAliasesAttr(), attr))
          return emitOpError()
                 << "alias " << attr << " is also an alias of @"
                 << other.getSymName();
    }
  }
  if (ArrayAttr parts = getPartsAttr()) {
    for (Attribute attr : parts)
      if (symbolTable.lookupNearestSymbolFrom(*this, cast<StringAttr>(attr)))
        return emitOpError() << "part " << attr
                             << " is the name of another symbol";
    for (ParamOp other :
         cast<ModuleOp>(getOperation()->getParentOp()).getOps<ParamOp>()) {
      if (other == *this)
        continue;
      for (Attribute attr : parts)
        if ((other.getPartsAttr() &&
             llvm::is_contained(other.getPartsAttr(), attr)) ||
            (other.getAliasesAttr() &&
             llvm::is_contained(other.getAliasesAttr(), attr)))
          return emitOpError() << "part " << attr
                               << " is also a checkpoint name of @"
                               << other.getSymName();
    }
  }
  if (FlatSymbolRefAttr source = getInit().getSource()) {
    auto from = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, source);
    if (!from)
      return emitOpError() << "is initialised as a copy of " << source
                           << ", which is not a meg.param";
    if (from.getFullShape() != getFullShape())
      return emitOpError() << "is initialised as a copy of " << source
                           << " of shape " << formatShape(from.getFullShape())
                           << ", but has shape "
                           << formatShape(getFullShape());
    if (from.getInit().getSource())
      return emitOpError() << "copies " << source
                           << ", which is itself a copy";
  }
  ShardingAttr sharding = getShardingAttr();
  if (!sharding)
    return success();
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(*this,
                                                          sharding.getMesh());
  if (!mesh)
    return emitOpError() << "is sharded over " << sharding.getMesh()
                         << ", which is not a meg.mesh";
  auto sizeOf = [&](ArrayAttr axes) -> FailureOr<int64_t> {
    int64_t size = 1;
    for (Attribute axis : axes) {
      std::optional<int64_t> extent =
          mesh.getAxisSize(cast<StringAttr>(axis).getValue());
      if (!extent)
        return emitOpError() << "is sharded over axis " << axis
                             << ", which mesh " << sharding.getMesh()
                             << " does not have";
      size *= *extent;
    }
    return size;
  };
  FailureOr<int64_t> flatGroup = sizeOf(sharding.getAxes());
  if (failed(flatGroup))
    return failure();
  int64_t groupSize = *flatGroup;
  // A flat piece of this rank's block: the block is what the pieces hold.
  SmallVector<int64_t> whole(sharding.getShape());
  if (ArrayAttr blockAxes = sharding.getBlockAxes()) {
    FailureOr<int64_t> blocks = sizeOf(blockAxes);
    if (failed(blocks))
      return failure();
    int64_t dim = sharding.getDim();
    if (whole[dim] % *blocks != 0)
      return emitOpError() << "splits dim " << dim << " of a "
                           << formatShape(sharding.getShape())
                           << " tensor over " << *blocks
                           << " ranks, which does not divide it";
    whole = sharding.blockShape(*blocks);
  } else if (sharding.isBlock()) {
    int64_t dim = sharding.getDim();
    SmallVector<int64_t> block(sharding.getShape());
    if (block[dim] % groupSize != 0)
      return emitOpError() << "splits dim " << dim << " of a "
                           << formatShape(sharding.getShape())
                           << " tensor over " << groupSize
                           << " ranks, which does not divide it";
    block[dim] /= groupSize;
    if (getTensorType().getShape() != ArrayRef<int64_t>(block))
      return emitOpError() << "is one of " << groupSize << " blocks along dim "
                           << dim << " of a "
                           << formatShape(sharding.getShape())
                           << " tensor, so its shape must be "
                           << formatShape(block) << ", got "
                           << formatShape(getTensorType().getShape());
    return success();
  }
  int64_t elements = 1;
  for (int64_t extent : whole)
    elements *= extent;
  int64_t piece = getTensorType().getDimSize(0);
  if (piece * groupSize < elements)
    return emitOpError() << "holds " << piece << " elements per rank of a "
                         << formatShape(whole) << " tensor ("
                         << elements << " elements) over " << groupSize
                         << " ranks; at least "
                         << (elements + groupSize - 1) / groupSize
                         << " are needed";
  return success();
}

//===----------------------------------------------------------------------===//
// ParamRefOp
//===----------------------------------------------------------------------===//

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(*this, getNameAttr());
  if (!symbol)
    return emitOpError() << "refers to " << getNameAttr()
                         << ", which is not defined";
  auto param = dyn_cast<ParamOp>(symbol);
  if (!param)
    return emitOpError() << "refers to " << getNameAttr()
                         << ", which is a '" << symbol->getName()
                         << "', not a meg.param";
  if (param.getType() != getType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type " << param.getType()
                         << " of parameter " << getNameAttr();
  return success();
}

//===----------------------------------------------------------------------===//
// ParamStoreOp
//===----------------------------------------------------------------------===//

LogicalResult ParamStoreOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError() << "stores to " << getNameAttr()
                         << ", which is not a meg.param";
  if (param.getType() != getValue().getType())
    return emitOpError() << "stores " << getValue().getType()
                         << " to parameter " << getNameAttr() << " of type "
                         << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes()))
    if (cast<StringAttr>(name).getValue() == axis)
      return size;
  return std::nullopt;
}

int64_t MeshOp::getNumDevices() {
  int64_t devices = 1;
  for (int64_t size : getAxisSizes())
    devices *= size;
  return devices;
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError() << "has " << getAxisNames().size()
                         << " axis names but " << getAxisSizes().size()
                         << " sizes";
  if (getAxisNames().empty())
    return emitOpError() << "expects at least one axis";
  llvm::StringSet<> seen;
  // Ranks are 32-bit in MPI and NCCL; no machine has a million GPUs.
  constexpr int64_t kMaxRanks = int64_t(1) << 20;
  int64_t ranks = 1;
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes())) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (axis.empty())
      return emitOpError() << "has an axis with an empty name";
    if (!seen.insert(axis).second)
      return emitOpError() << "has axis '" << axis << "' twice";
    if (size < 1)
      return emitOpError() << "expects axis '" << axis
                           << "' to have size >= 1, got " << size;
    if (size > kMaxRanks || ranks * size > kMaxRanks)
      return emitOpError() << "has more than " << kMaxRanks
                           << " ranks (the product of its axis sizes) by axis '"
                           << axis << "' of size " << size;
    ranks *= size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// SubmeshOp
//===----------------------------------------------------------------------===//

/// Writes `@mesh[a, b]`.
static void printGroup(InFlightDiagnostic &diag, FlatSymbolRefAttr mesh,
                       ArrayAttr axes) {
  diag << mesh << "[";
  llvm::interleaveComma(axes, diag, [&](Attribute axis) {
    diag << cast<StringAttr>(axis).getValue();
  });
  diag << "]";
}

/// Finds the mesh `meshRef` and checks that `axes` are distinct axes of it.
static FailureOr<MeshOp> lookupMeshAxes(Operation *user,
                                        SymbolTableCollection &symbolTable,
                                        FlatSymbolRefAttr meshRef,
                                        ArrayAttr axes) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(user, meshRef);
  auto mesh = dyn_cast_if_present<MeshOp>(symbol);
  if (!mesh)
    return static_cast<LogicalResult>(user->emitOpError() << "refers to mesh " << meshRef
                               << ", which is not a meg.mesh");
  if (axes.empty())
    return static_cast<LogicalResult>(user->emitOpError() << "expects at least one mesh axis");
  llvm::StringSet<> seen;
  for (Attribute axis : axes) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (!mesh.getAxisSize(name))
      return static_cast<LogicalResult>(user->emitOpError() << "uses axis '" << name << "', which mesh "
                                 << meshRef << " does not have");
    if (!seen.insert(name).second)
      return static_cast<LogicalResult>(user->emitOpError() << "uses axis '" << name << "' twice");
  }
  return mesh;
}

LogicalResult SubmeshOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(lookupMeshAxes(*this, symbolTable, getMeshAttr(), getAxesAttr())))
    return failure();
  for (Operation &other : (*this)->getBlock()->getOperations()) {
    if (&other == getOperation())
      break;
    auto earlier = dyn_cast<SubmeshOp>(&other);
    if (earlier && earlier.getMeshAttr() == getMeshAttr() &&
        earlier.getAxesAttr() == getAxesAttr()) {
      InFlightDiagnostic diag = emitOpError() << "registers ";
      printGroup(diag, getMeshAttr(), getAxesAttr());
      diag << " a second time";
      diag.attachNote(earlier.getLoc()) << "first registered here";
      return diag;
    }
  }
  return success();
}

FailureOr<int64_t> SubmeshOp::verifyGroup(Operation *user,
                                          SymbolTableCollection &symbolTable,
                                          FlatSymbolRefAttr meshRef,
                                          ArrayAttr axes) {
  FailureOr<MeshOp> mesh = lookupMeshAxes(user, symbolTable, meshRef, axes);
  if (failed(mesh))
    return failure();
  int64_t groupSize = 1;
  for (Attribute axis : axes)
    groupSize *= *mesh->getAxisSize(cast<StringAttr>(axis).getValue());

  Block *moduleBlock = (*mesh)->getBlock();
  SmallVector<SubmeshOp> registered;
  for (auto submesh : moduleBlock->getOps<SubmeshOp>()) {
    if (submesh.getMeshAttr() == meshRef && submesh.getAxesAttr() == axes)
      return groupSize;
    registered.push_back(submesh);
  }
  InFlightDiagnostic diag = user->emitOpError() << "communicates over ";
  printGroup(diag, meshRef, axes);
  diag << ", which is not a registered submesh; registered: ";
  if (registered.empty())
    diag << "none";
  llvm::interleaveComma(registered, diag, [&](SubmeshOp submesh) {
    printGroup(diag, submesh.getMeshAttr(), submesh.getAxesAttr());
  });
  return static_cast<LogicalResult>(diag);
}

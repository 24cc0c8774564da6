//===- MegAttrs.cpp - meg enums and attributes -------------------------===//
//
// Parsing, printing and verification of the meg attributes.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace mlir::meg;

#include "megc/Dialect/Meg/IR/MegEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "megc/Dialect/Meg/IR/MegAttrs.cpp.inc"

void MegDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "megc/Dialect/Meg/IR/MegAttrs.cpp.inc"
      >();
}

void mlir::meg::printF64(AsmPrinter &printer, double value) {
  // Shortest %g form that reads back as the same double, spelled as an MLIR
  // float literal (which needs a '.' before any exponent).
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text(buffer);
  if (std::isfinite(value) && text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  printer << text;
}

FailureOr<double> mlir::meg::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return value;
}

FailureOr<llvm::APFloat> mlir::meg::parseF64AsAPFloat(AsmParser &parser) {
  FailureOr<double> value = parseF64(parser);
  if (failed(value))
    return failure();
  return llvm::APFloat(*value);
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown init kind '" << keyword
                          << "'; expected zeros, ones, normal, uniform or "
                             "copy";
    return {};
  }
  double scale = 0.0;
  FlatSymbolRefAttr source;
  if (*kind == InitKind::copy) {
    if (parser.parseLParen() || parser.parseAttribute(source) ||
        parser.parseRParen() || parser.parseGreater())
      return {};
    return parser.getChecked<InitAttr>(loc, parser.getContext(), *kind,
                                       APFloat(0.0), source);
  }
  if (*kind == InitKind::normal || *kind == InitKind::uniform) {
    FailureOr<double> value;
    if (parser.parseLParen() || failed(value = parseF64(parser)) ||
        parser.parseRParen())
      return {};
    scale = *value;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<InitAttr>(loc, parser.getContext(), *kind,
                                     APFloat(scale), FlatSymbolRefAttr());
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (getKind() == InitKind::normal || getKind() == InitKind::uniform) {
    printer << '(';
    printF64(printer, getScale().convertToDouble());
    printer << ')';
  }
  if (getKind() == InitKind::copy)
    printer << '(' << getSource() << ')';
  printer << '>';
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat scaleValue,
                               FlatSymbolRefAttr source) {
  if ((kind == InitKind::copy) != static_cast<bool>(source))
    return emitError() << (source ? "only init kind copy names a source"
                                  : "init kind copy needs a source parameter");
  double scale = scaleValue.convertToDouble();
  bool hasScale = kind == InitKind::normal || kind == InitKind::uniform;
  // Weights of that size overflow the products of any layer.
  if (hasScale && !(scale >= 0.0 && scale <= 1000.0))
    return emitError() << "expects the " << stringifyInitKind(kind)
                       << " init scale in [0, 1000], got " << scale;
  if (!hasScale && scale != 0.0)
    return emitError() << "init kind " << stringifyInitKind(kind)
                       << " takes no scale";
  return success();
}

//===----------------------------------------------------------------------===//
// ShardingAttr, FsdpAttr
//===----------------------------------------------------------------------===//

/// Checks that `axes` is a non-empty list of distinct, non-empty strings.
static LogicalResult
verifyAxisNames(function_ref<InFlightDiagnostic()> emitError, ArrayAttr axes,
                StringRef what) {
  if (!axes || axes.empty())
    return emitError() << "expects at least one " << what << " axis";
  llvm::StringSet<> seen;
  for (Attribute axis : axes) {
    auto name = dyn_cast<StringAttr>(axis);
    if (!name || name.getValue().empty())
      return emitError() << "expects " << what
                         << " axes to be non-empty strings, got " << axis;
    if (!seen.insert(name.getValue()).second)
      return emitError() << what << " axis '" << name.getValue()
                         << "' appears twice";
  }
  return success();
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr axes,
                                   ArrayRef<int64_t> shape, int64_t dim,
                                   ArrayAttr blockAxes) {
  if (!mesh)
    return emitError() << "expects a mesh symbol";
  if (dim < -1 || dim >= static_cast<int64_t>(shape.size()))
    return emitError() << "dim " << dim << " is out of range for a "
                       << shape.size() << "-d shape";
  if (blockAxes) {
    if (dim < 0)
      return emitError() << "block_axes need the dim the blocks split";
    if (failed(verifyAxisNames(emitError, blockAxes, "block")))
      return failure();
    for (Attribute axis : blockAxes)
      if (llvm::is_contained(axes.getValue(), axis))
        return emitError() << "axis " << axis
                           << " both splits the blocks and the pieces";
  }
  for (int64_t extent : shape)
    if (extent <= 0)
      return emitError() << "expects positive extents in the full shape, got "
                         << extent;
  return verifyAxisNames(emitError, axes, "sharding");
}

ArrayAttr FsdpAttr::getBatchAxes() const {
  SmallVector<Attribute> axes;
  if (getOuter())
    llvm::append_range(axes, getOuter().getValue());
  for (Attribute axis : getShard())
    if (!getContextAxes() ||
        !llvm::is_contained(getContextAxes().getValue(), axis))
      axes.push_back(axis);
  return ArrayAttr::get(getContext(), axes);
}

LogicalResult FsdpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               FsdpStrategy strategy, FlatSymbolRefAttr mesh,
                               ArrayAttr shard, ArrayAttr outer,
                               FsdpStrategy outerStrategy, int64_t bucketMb,
                               ArrayAttr contextAxes) {
  if (!mesh)
    return emitError() << "expects a mesh symbol";
  if (failed(verifyAxisNames(emitError, shard, "shard")))
    return failure();
  if (outer) {
    if (failed(verifyAxisNames(emitError, outer, "outer")))
      return failure();
    for (Attribute axis : outer)
      if (llvm::is_contained(shard.getValue(), axis))
        return emitError() << "axis " << axis
                           << " is both a shard and an outer axis";
  }
  if (outerStrategy != FsdpStrategy::no_shard &&
      outerStrategy != FsdpStrategy::optim)
    return emitError() << "expects outer_strategy no_shard or optim, got "
                       << stringifyFsdpStrategy(outerStrategy);
  if (outerStrategy == FsdpStrategy::optim) {
    if (!outer)
      return emitError() << "outer_strategy optim needs outer axes";
    if (strategy != FsdpStrategy::optim_grads_params)
      return emitError() << "outer_strategy optim requires strategy "
                            "optim_grads_params, got "
                         << stringifyFsdpStrategy(strategy);
  }
  if (bucketMb <= 0)
    return emitError() << "expects bucket_mb > 0, got " << bucketMb;
  if (contextAxes) {
    if (failed(verifyAxisNames(emitError, contextAxes, "context_axes")))
      return failure();
    for (Attribute axis : contextAxes)
      if (!llvm::is_contained(shard.getValue(), axis))
        return emitError() << "context axis " << axis << " is not a shard axis";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PrecisionAttr
//===----------------------------------------------------------------------===//

/// Checks that `type` is one of the float types `allowed` names.
static LogicalResult expectDtype(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef field, Type type,
                                 ArrayRef<StringRef> allowed) {
  std::string spelled;
  llvm::raw_string_ostream os(spelled);
  os << type;
  if (llvm::is_contained(allowed, spelled))
    return success();
  auto diag = emitError() << "expects " << field << " to be one of ";
  llvm::interleaveComma(allowed, diag);
  return diag << ", got " << type;
}

LogicalResult
PrecisionAttr::verify(function_ref<InFlightDiagnostic()> emitError, Type param,
                      Type mainParams, Type mainGrads, Type gradReduce,
                      Type expAvg, Type expAvgSq) {
  if (failed(expectDtype(emitError, "param", param, {"f32", "bf16", "f16"})) ||
      failed(
          expectDtype(emitError, "main_params", mainParams, {"f32", "f16"})) ||
      failed(
          expectDtype(emitError, "main_grads", mainGrads, {"f32", "bf16"})) ||
      failed(
          expectDtype(emitError, "grad_reduce", gradReduce, {"f32", "bf16"})) ||
      failed(
          expectDtype(emitError, "exp_avg", expAvg, {"f32", "bf16", "f16"})) ||
      failed(expectDtype(emitError, "exp_avg_sq", expAvgSq,
                         {"f32", "bf16", "f16"})))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AdamWAttr
//===----------------------------------------------------------------------===//

LogicalResult AdamWAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat lrValue, APFloat beta1Value,
                                APFloat beta2Value, APFloat epsValue,
                                APFloat weightDecayValue, APFloat clipValue) {
  double lr = lrValue.convertToDouble();
  double beta1 = beta1Value.convertToDouble();
  double beta2 = beta2Value.convertToDouble();
  double eps = epsValue.convertToDouble();
  double weightDecay = weightDecayValue.convertToDouble();
  if (!(lr > 0.0 && lr <= std::numeric_limits<float>::max()))
    return emitError() << "expects lr > 0 (that f32 can hold), got " << lr;
  if (!(beta1 >= 0.0 && beta1 < 1.0))
    return emitError() << "expects beta1 in [0, 1), got " << beta1;
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    return emitError() << "expects beta2 in [0, 1), got " << beta2;
  // The update computes in f32: each value must be one f32 can hold.
  constexpr double kF32Max = std::numeric_limits<float>::max();
  if (!(eps > 0.0 && eps <= kF32Max))
    return emitError() << "expects eps > 0 (that f32 can hold), got " << eps;
  if (!(weightDecay >= 0.0 && weightDecay <= kF32Max))
    return emitError() << "expects weight_decay >= 0 (that f32 can hold), got "
                       << weightDecay;
  double clip = clipValue.convertToDouble();
  if (!(clip >= 0.0 && clip <= kF32Max))
    return emitError() << "expects clip_grad >= 0 (0: no clipping; that f32 "
                          "can hold), got "
                       << clip;
  return success();
}

LogicalResult LrScheduleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, LrScheduleKind kind,
    int64_t warmup, int64_t decay, APFloat minLrValue, APFloat initLrValue,
    int64_t wsdDecay, WsdDecayStyle, FlatSymbolRefAttr, FlatSymbolRefAttr) {
  double minLr = minLrValue.convertToDouble();
  double initLr = initLrValue.convertToDouble();
  if (warmup < 0 || decay < 0 || wsdDecay < 0)
    return emitError() << "expects warmup, decay and wsd_decay >= 0, got "
                       << warmup << ", " << decay << " and " << wsdDecay;
  constexpr double kF32Max = std::numeric_limits<float>::max();
  if (!(minLr >= 0.0 && minLr <= kF32Max) ||
      !(initLr >= 0.0 && initLr <= kF32Max))
    return emitError() << "expects min_lr and init_lr >= 0 (that f32 can "
                          "hold), got "
                       << minLr << " and " << initLr;
  if (kind != LrScheduleKind::constant && decay <= warmup)
    return emitError() << "expects decay (" << decay
                       << " steps) > warmup (" << warmup << " steps) for a "
                       << stringifyLrScheduleKind(kind) << " schedule";
  if (kind == LrScheduleKind::wsd && (wsdDecay < 1 || wsdDecay > decay - warmup))
    return emitError() << "expects wsd_decay in [1, decay - warmup = "
                       << decay - warmup << "], got " << wsdDecay;
  if (kind != LrScheduleKind::wsd && wsdDecay != 0)
    return emitError() << "wsd_decay applies to the wsd schedule only";
  return success();
}

LogicalResult
KernelStrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           KernelStrategyKind kind, ArrayRef<int64_t> domain,
                           ArrayRef<int64_t> tile, int64_t vector) {
  if (domain.size() != tile.size())
    return emitError() << "kernel_strategy has a domain of rank "
                       << domain.size() << " but a tile of rank "
                       << tile.size();
  for (auto [index, extent, size] : llvm::enumerate(domain, tile))
    if (extent < 1 || size < 1 || extent % size != 0)
      return emitError() << "kernel_strategy tile " << size
                         << " does not divide domain dimension " << index
                         << " of extent " << extent;
  if (vector < 1 || !llvm::isPowerOf2_64(vector))
    return emitError() << "kernel_strategy vector width " << vector
                       << " is not a positive power of two";
  if (kind == KernelStrategyKind::serial && !domain.empty())
    return emitError() << "a serial kernel_strategy has no domain";
  return success();
}

LogicalResult
TensorParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           FlatSymbolRefAttr mesh, ArrayAttr axes,
                           bool sequenceParallel) {
  if (!mesh)
    return emitError() << "expects a mesh symbol";
  return verifyAxisNames(emitError, axes, "tensor_parallel");
}

LogicalResult
ContextParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            FlatSymbolRefAttr mesh, ArrayAttr axes,
                            CpAttention) {
  if (!mesh)
    return emitError() << "expects a mesh symbol";
  return verifyAxisNames(emitError, axes, "context_parallel");
}

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr axes,
                                   int64_t virtualStages,
                                   DenseI64ArrayAttr layers,
                                   StringAttr schedule) {
  if (!mesh)
    return emitError() << "expects a mesh symbol";
  if (virtualStages < 1)
    return emitError() << "expects virtual_stages >= 1, got " << virtualStages;
  if (schedule &&
      !llvm::is_contained(
          {StringRef("1f1b"), StringRef("interleaved"), StringRef("zb-h1")},
          schedule.getValue()))
    return emitError() << "unknown pipeline schedule '" << schedule.getValue()
                       << "' (expected 1f1b, interleaved or zb-h1)";
  return verifyAxisNames(emitError, axes, "pipeline");
}

LogicalResult TpLayerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  TpLayerKind kind, int64_t groups) {
  if (groups < 0)
    return emitError() << "tp_layer groups must not be negative, got "
                       << groups;
  if (groups && kind != TpLayerKind::column)
    return emitError() << "tp_layer groups apply to column layers only";
  return success();
}

int64_t KernelStrategyAttr::getGridSize() const {
  int64_t grid = 1;
  for (auto [extent, size] : llvm::zip(getDomain(), getTile()))
    grid *= extent / size;
  return grid;
}

/// `[e, ...]`, possibly empty.
static ParseResult parseExtents(AsmParser &parser, StringRef keyword,
                                SmallVector<int64_t> &values) {
  return failure(
      parser.parseKeyword(keyword) || parser.parseEqual() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return parser.parseInteger(values.emplace_back());
      }));
}

Attribute KernelStrategyAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<KernelStrategyKind> kind = symbolizeKernelStrategyKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown kernel strategy '" << keyword
                          << "'; expected serial, pointwise, row_reduction, "
                             "column_reduction or full_reduction";
    return {};
  }
  SmallVector<int64_t> domain, tile;
  int64_t vector = 0;
  if (parser.parseComma() || parseExtents(parser, "domain", domain) ||
      parser.parseComma() || parseExtents(parser, "tile", tile) ||
      parser.parseComma() || parser.parseKeyword("vector") ||
      parser.parseEqual() || parser.parseInteger(vector) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<KernelStrategyAttr>(loc, parser.getContext(), *kind,
                                               domain, tile, vector);
}

void KernelStrategyAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyKernelStrategyKind(getKind()) << ", domain = [";
  llvm::interleaveComma(getDomain(), printer);
  printer << "], tile = [";
  llvm::interleaveComma(getTile(), printer);
  printer << "], vector = " << getVector() << '>';
}

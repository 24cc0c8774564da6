//===- MegTargetAttr.cpp - #meg.target ----------------------------------===//
//
// The device a module's kernels are for: parsed once into typed facts (a
// CPU's vector width, a CUDA architecture) that the kernel passes read.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::meg;

namespace {
/// Vector registers a CPU target may have: one f32 at least (every kernel
/// computes in f32), AVX-512 at most.
constexpr unsigned kMinVectorBits = 32, kMaxVectorBits = 512;
} // namespace

TargetAttr TargetAttr::getCpu(MLIRContext *context, unsigned vectorBits) {
  return get(context, TargetKind::cpu, vectorBits, 0, 0, 0);
}

TargetAttr TargetAttr::getCuda(MLIRContext *context,
                               const megc::CudaArch &arch) {
  return get(context, TargetKind::cuda, 0, arch.major, arch.minor, arch.suffix);
}

TargetAttr TargetAttr::of(Operation *module) {
  if (auto target =
          module->getAttrOfType<TargetAttr>(MegDialect::kTargetAttrName))
    return target;
  return getCpu(module->getContext(), 128);
}

megc::CudaArch TargetAttr::getCudaArch() const {
  megc::CudaArch arch;
  arch.major = getCudaMajor();
  arch.minor = getCudaMinor();
  arch.suffix = getCudaSuffix();
  return arch;
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 TargetKind kind, unsigned vectorBits,
                                 unsigned cudaMajor, unsigned cudaMinor,
                                 char cudaSuffix) {
  if (kind == TargetKind::cpu) {
    if (vectorBits < kMinVectorBits || vectorBits > kMaxVectorBits ||
        !llvm::isPowerOf2_32(vectorBits))
      return emitError() << "vector_bits " << vectorBits
                         << " is not a power of two from " << kMinVectorBits
                         << " to " << kMaxVectorBits;
    if (cudaMajor || cudaMinor || cudaSuffix)
      return emitError() << "a cpu target has no CUDA architecture";
    return success();
  }
  if (vectorBits)
    return emitError() << "a cuda target has no vector_bits";
  megc::CudaArch arch;
  arch.major = cudaMajor;
  arch.minor = cudaMinor;
  arch.suffix = cudaSuffix;
  // The known chips are those CudaArch::parse accepts.
  if (llvm::Expected<megc::CudaArch> known = megc::CudaArch::parse(arch.name());
      !known)
    return emitError() << llvm::toString(known.takeError());
  return success();
}

Attribute TargetAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<TargetKind> kind = symbolizeTargetKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown target '" << keyword
                          << "'; expected cpu or cuda";
    return {};
  }
  if (*kind == TargetKind::cpu) {
    unsigned vectorBits = 0;
    if (parser.parseComma() || parser.parseKeyword("vector_bits") ||
        parser.parseEqual() || parser.parseInteger(vectorBits) ||
        parser.parseGreater())
      return {};
    return parser.getChecked<TargetAttr>(loc, parser.getContext(), *kind,
                                         vectorBits, 0u, 0u, char(0));
  }
  std::string name;
  SMLoc archLoc;
  if (parser.parseComma() || parser.parseKeyword("arch") ||
      parser.parseEqual() ||
      (archLoc = parser.getCurrentLocation(), parser.parseString(&name)) ||
      parser.parseGreater())
    return {};
  llvm::Expected<megc::CudaArch> arch = megc::CudaArch::parse(name, "arch");
  if (!arch) {
    parser.emitError(archLoc) << llvm::toString(arch.takeError());
    return {};
  }
  return getCuda(parser.getContext(), *arch);
}

void TargetAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyTargetKind(getKind());
  if (isCuda())
    printer << ", arch = \"" << getCudaArch().name() << "\">";
  else
    printer << ", vector_bits = " << getVectorBits() << '>';
}

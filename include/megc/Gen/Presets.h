//===- Presets.h - model presets written as meg IR --------------*- C++ -*-===//
//
// Builds whole models (Llama decoder, MMDiT, Flux single-stream) as meg
// modules, with RoPE in the unfused form a framework exports.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_GEN_PRESETS_H
#define MEGC_GEN_PRESETS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace megc::gen {

/// Element type of parameters and activations.
enum class DType { F32, BF16, F16 };

/// Parses `f32`, `bf16` or `f16`.
llvm::Expected<DType> parseDType(llvm::StringRef text);

/// Rotary embedding settings shared by the presets that use RoPE.
struct RopeConfig {
  bool interleaved = false;
  double percent = 1.0;
  double theta = 10000.0;
};

/// A Llama-style decoder with Hugging Face parameter names.
struct LlamaConfig {
  int64_t layers = 2, hidden = 64, heads = 4, kvHeads = 2, ffn = 176;
  int64_t vocab = 256, seq = 16, batch = 2;
  DType dtype = DType::F32;
  RopeConfig rope;
  double normEps = 1e-5;
};

/// The sizes the diffusion transformer presets share: image tokens `seq`,
/// text tokens `textSeq`, latent channels and text embedding width.
struct DiTConfig {
  int64_t layers = 2, hidden = 64, heads = 4, seq = 16, textSeq = 8;
  int64_t batch = 2, inChannels = 16, contextDim = 32;
  DType dtype = DType::F32;
  double normEps = 1e-6;
};

/// Joint text/image blocks with adaLN modulation (Stable Diffusion 3).
struct MMDiTConfig : DiTConfig {};

/// Single-stream blocks with parallel attention and MLP (Flux).
struct FluxConfig : DiTConfig {
  RopeConfig rope;
};

/// Each builder checks its configuration and returns a verified module, or
/// an error that names the offending setting.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildLlama(mlir::MLIRContext &context, const LlamaConfig &config);
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildMMDiT(mlir::MLIRContext &context, const MMDiTConfig &config);
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildFlux(mlir::MLIRContext &context, const FluxConfig &config);

} // namespace megc::gen

#endif // MEGC_GEN_PRESETS_H

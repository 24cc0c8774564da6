//===- DiffusionCommon.h - shared parts of the DiT presets ------*- C++ -*-===//
//
// Configuration checks, embedders, the output head and the entry points
// shared by the MMDiT and Flux presets.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_GEN_DIFFUSIONCOMMON_H
#define MEGC_LIB_GEN_DIFFUSIONCOMMON_H

#include "ModelBuilder.h"

namespace megc::gen {

/// Checks sizes, head divisibility and eps.
llvm::Error checkDiT(const DiTConfig &s);

/// Declares `x_embedder`, `context_embedder` (run before the blocks).
void declareEmbedders(ModelBuilder &b, const DiTConfig &s);
/// Declares `norm_out.linear` and `proj_out` (run after the blocks).
void declareHead(ModelBuilder &b, const DiTConfig &s);

/// The inputs of a DiT forward: latents [B, S, C], context [B, T, Cctx],
/// conditioning [B, H] (timestep and pooled text embedding, combined).
llvm::SmallVector<NamedType> ditInputs(ModelBuilder &b, const DiTConfig &s);

/// `proj_out(modulate(layer_norm(x), shift, scale))` with the adaLN output
/// norm.
mlir::Value ditHead(ModelBuilder &b, const DiTConfig &s, mlir::Value x,
                    mlir::Value cond);

/// Emits `loss(latents, context, conditioning, target) -> mse` calling
/// `forward`.
void ditLoss(ModelBuilder &b, const DiTConfig &s);

} // namespace megc::gen

#endif // MEGC_LIB_GEN_DIFFUSIONCOMMON_H

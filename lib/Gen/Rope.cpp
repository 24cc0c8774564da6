//===- Rope.cpp - RoPE in the unfused form a framework exports ---------===//
//
// Writes rotary position embeddings the way Hugging Face / Megatron export
// them (frequencies, embedding layout, cos/sin, rotate_half by slices and
// concat, multiply-add, pass-through tail), so that the fusion pass has the
// real pattern to recognise.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include <cmath>

using namespace mlir;

namespace megc::gen {

llvm::Expected<int64_t> rotaryDimFor(int64_t headDim,
                                     const RopeConfig &config) {
  if (!(config.percent > 0.0 && config.percent <= 1.0))
    return configError("--rotary-percent must be in (0, 1], got " +
                       formatNumber(config.percent));
  if (!(config.theta > 0.0))
    return configError("--rope-theta must be > 0, got " +
                       formatNumber(config.theta));
  auto rotaryDim = static_cast<int64_t>(
      std::llround(static_cast<double>(headDim) * config.percent));
  if (rotaryDim < 2 || rotaryDim % 2 != 0)
    return configError("rotary dim = head dim " + llvm::Twine(headDim) +
                       " x rotary percent " + formatNumber(config.percent) +
                       " = " + llvm::Twine(rotaryDim) +
                       " must be even and >= 2");
  return rotaryDim;
}

/// Llama 3.x scaling of the inverse frequencies, in f32 and in the order of
/// operations of transformers' `_compute_llama3_parameters`.
static void scaleLlama3(MutableArrayRef<float> invFreq,
                        const Llama3RopeScaling &scaling) {
  auto factor = static_cast<float>(scaling.factor);
  auto low = static_cast<float>(scaling.lowFreqFactor);
  auto context = static_cast<float>(scaling.originalMaxPositions);
  auto lowFreqWavelength = static_cast<float>(
      static_cast<double>(scaling.originalMaxPositions) /
      scaling.lowFreqFactor);
  auto highFreqWavelength = static_cast<float>(
      static_cast<double>(scaling.originalMaxPositions) /
      scaling.highFreqFactor);
  auto span = static_cast<float>(scaling.highFreqFactor -
                                 scaling.lowFreqFactor);
  auto twoPi = static_cast<float>(2.0 * M_PI);
  for (float &inv : invFreq) {
    float wavelength = twoPi / inv;
    if (wavelength > lowFreqWavelength) {
      inv = inv / factor;
    } else if (!(wavelength < highFreqWavelength)) {
      // One operation a statement, so that no FMA contraction changes the
      // rounding.
      float ratio = context / wavelength;
      float smooth = (ratio - low) / span;
      float scaledPart = (1.0f - smooth) * inv;
      scaledPart = scaledPart / factor;
      float keptPart = smooth * inv;
      inv = scaledPart + keptPart;
    }
  }
}

/// YaRN's inverse frequencies, in f32 and in the order of operations of
/// transformers' `_compute_yarn_parameters` (the correction range in
/// double, as Python computes it).
static void scaleYarn(MutableArrayRef<float> invFreq, int64_t rotaryDim,
                      double theta, const YarnRopeScaling &yarn) {
  auto correctionDim = [&](double rotations) {
    return static_cast<double>(rotaryDim) *
           std::log(static_cast<double>(yarn.originalMaxPositions) /
                    (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(theta));
  };
  double low = correctionDim(yarn.betaFast);
  double high = correctionDim(yarn.betaSlow);
  if (yarn.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotaryDim - 1));
  if (low == high)
    high += 0.001;
  auto lowF = static_cast<float>(low);
  auto span = static_cast<float>(high - low);
  auto factor = static_cast<float>(yarn.factor);
  for (size_t j = 0; j < invFreq.size(); ++j) {
    float exponent =
        static_cast<float>(2 * j) / static_cast<float>(rotaryDim);
    float position = std::pow(static_cast<float>(theta), exponent);
    float extrapolation = 1.0f / position;
    float scaled = factor * position;
    float interpolation = 1.0f / scaled;
    float ramp = (static_cast<float>(j) - lowF) / span;
    ramp = std::min(std::max(ramp, 0.0f), 1.0f);
    float kept = 1.0f - ramp;
    float interpolated = interpolation * (1.0f - kept);
    float extrapolated = extrapolation * kept;
    invFreq[j] = interpolated + extrapolated;
  }
}

double yarnMscale(double scale, double mscale) {
  if (scale <= 1.0)
    return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

RopeTables buildRopeTables(ModelBuilder &b, int64_t seq, int64_t rotaryDim,
                           const RopeConfig &config) {
  int64_t half = rotaryDim / 2;
  // inv_freq[j] = 1 / theta^(2j / dim), in f32 as the references compute it.
  SmallVector<float> invFreq;
  for (int64_t j = 0; j < half; ++j) {
    float exponent = static_cast<float>(2 * j) / static_cast<float>(rotaryDim);
    invFreq.push_back(1.0f / std::pow(static_cast<float>(config.theta),
                                      exponent));
  }
  if (config.llama3)
    scaleLlama3(invFreq, *config.llama3);
  if (config.yarn)
    scaleYarn(invFreq, rotaryDim, config.theta, *config.yarn);
  Value positions = b.reshape(b.iota(seq), {seq, 1});
  Value freqs = b.mul(positions, b.constantF32(invFreq)); // [S, half]

  Value emb;
  if (config.interleaved) {
    // [f0, f0, f1, f1, ...]: pair each frequency with itself.
    Value column = b.reshape(freqs, {seq, half, 1});
    emb = b.reshape(b.concat({column, column}, 2), {seq, rotaryDim});
  } else {
    // [f0 .. f(k-1), f0 .. f(k-1)]
    emb = b.concat({freqs, freqs}, 1);
  }
  Value cosF32 = b.cos(emb), sinF32 = b.sin(emb);
  if (config.yarn) {
    const YarnRopeScaling &yarn = *config.yarn;
    double attention =
        yarn.attentionFactor ? *yarn.attentionFactor
        : yarn.mscale != 0.0 && yarn.mscaleAllDim != 0.0
            ? yarnMscale(yarn.factor, yarn.mscale) /
                  yarnMscale(yarn.factor, yarn.mscaleAllDim)
            : yarnMscale(yarn.factor, 1.0);
    Value factor = b.reshape(
        b.constantF32({static_cast<float>(attention)}), {});
    cosF32 = b.mul(cosF32, factor);
    sinF32 = b.mul(sinF32, factor);
  }
  // The references round cos/sin to the activation dtype before use.
  Value cos = b.cast(cosF32, b.dtype());
  Value sin = b.cast(sinF32, b.dtype());
  return {b.reshape(cos, {1, seq, 1, rotaryDim}),
          b.reshape(sin, {1, seq, 1, rotaryDim}), rotaryDim};
}

/// rotate_half of `x` [B, S, H, R] in either form.
static Value rotateHalf(ModelBuilder &b, Value x, bool interleaved) {
  SmallVector<int64_t> shape(ModelBuilder::shapeOf(x));
  int64_t rotaryDim = shape.back();
  int64_t half = rotaryDim / 2;
  if (!interleaved) {
    Value x1 = b.sliceLast(x, 0, half);
    Value x2 = b.sliceLast(x, half, half);
    return b.concat({b.neg(x2), x1}, 3);
  }
  // x1 = x[..., 0::2], x2 = x[..., 1::2]; stack(-x2, x1, -1).flatten(-2)
  Value x1 = b.sliceLast(x, 0, half, 2);
  Value x2 = b.sliceLast(x, 1, half, 2);
  SmallVector<int64_t> pairShape(shape);
  pairShape.back() = half;
  pairShape.push_back(1);
  Value stacked = b.concat(
      {b.reshape(b.neg(x2), pairShape), b.reshape(x1, pairShape)}, 4);
  return b.reshape(stacked, shape);
}

Value applyRope(ModelBuilder &b, Value x, const RopeTables &tables,
                bool interleaved) {
  int64_t headDim = ModelBuilder::shapeOf(x).back();
  bool partial = tables.rotaryDim < headDim;
  Value rotary = partial ? b.sliceLast(x, 0, tables.rotaryDim) : x;
  Value rotated = b.add(b.mul(rotary, tables.cos),
                        b.mul(rotateHalf(b, rotary, interleaved), tables.sin));
  if (!partial)
    return rotated;
  Value tail = b.sliceLast(x, tables.rotaryDim, headDim - tables.rotaryDim);
  return b.concat({rotated, tail}, 3);
}

} // namespace megc::gen

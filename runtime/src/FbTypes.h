// Conversions from the generated FlatBuffers types to the public API types.
#ifndef MEGRT_SRC_FBTYPES_H
#define MEGRT_SRC_FBTYPES_H

#include "megrt/DType.h"
#include "megrt/Program.h"
#include "megrt/Shape.h"
#include "megrt/megc_generated.h"

#include <cstring>
#include <string>

namespace megrt {

static_assert(
    static_cast<int>(fb::DType::f32) == static_cast<int>(DType::F32) &&
        static_cast<int>(fb::DType::bf16) == static_cast<int>(DType::BF16) &&
        static_cast<int>(fb::DType::f16) == static_cast<int>(DType::F16) &&
        static_cast<int>(fb::DType::i32) == static_cast<int>(DType::I32) &&
        static_cast<int>(fb::DType::i64) == static_cast<int>(DType::I64),
    "megrt::DType must mirror the schema's DType");
static_assert(static_cast<int>(fb::InitKind::zeros) ==
                      static_cast<int>(InitKind::Zeros) &&
                  static_cast<int>(fb::InitKind::ones) ==
                      static_cast<int>(InitKind::Ones) &&
                  static_cast<int>(fb::InitKind::normal) ==
                      static_cast<int>(InitKind::Normal) &&
                  static_cast<int>(fb::InitKind::uniform) ==
                      static_cast<int>(InitKind::Uniform),
              "megrt::InitKind must mirror the schema's InitKind");

/// Enum fields are plain bytes on the wire; the verifier calls these before
/// any conversion.
inline bool isValid(fb::DType dtype) {
  return dtype >= fb::DType::MIN && dtype <= fb::DType::MAX;
}
inline bool isValid(fb::InitKind kind) {
  return kind >= fb::InitKind::MIN && kind <= fb::InitKind::MAX;
}
inline bool isValid(fb::GemmEpilogue epilogue) {
  return epilogue >= fb::GemmEpilogue::MIN && epilogue <= fb::GemmEpilogue::MAX;
}
inline bool isValid(fb::BufferKind kind) {
  return kind >= fb::BufferKind::MIN && kind <= fb::BufferKind::MAX;
}

inline bool isValid(fb::ReduceOp op) {
  return op >= fb::ReduceOp::MIN && op <= fb::ReduceOp::MAX;
}
inline bool isValid(fb::LrScheduleKind kind) {
  return kind >= fb::LrScheduleKind::MIN && kind <= fb::LrScheduleKind::MAX;
}
inline bool isValid(fb::WsdDecayStyle style) {
  return style >= fb::WsdDecayStyle::MIN && style <= fb::WsdDecayStyle::MAX;
}

inline DType toDType(fb::DType dtype) { return static_cast<DType>(dtype); }

inline std::string toString(const flatbuffers::String *text) {
  return text ? text->str() : std::string();
}

/// The verifier only guarantees 4-byte alignment for vectors, so a damaged
/// file can hold a [long] at an address that is not 8-aligned: copy bytes
/// instead of loading int64s in place.
inline Shape toShape(const flatbuffers::Vector<int64_t> *dims) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "FlatBuffers scalars are little-endian");
  if (!dims)
    return Shape();
  Shape shape(dims->size());
  if (!shape.empty())
    std::memcpy(shape.data(), dims->Data(), shape.size() * sizeof(int64_t));
  return shape;
}

/// An absent vector reads as empty.
template <typename T> uint32_t sizeOf(const flatbuffers::Vector<T> *vector) {
  return vector ? vector->size() : 0;
}

inline const fb::Program &flatbufferOf(const Program &program) {
  return *fb::GetProgram(program.bytes());
}

} // namespace megrt

#endif // MEGRT_SRC_FBTYPES_H

// The collectives of megrt/Collectives.def as a table: shared by the
// compiler, which emits Collective commands, and the runtime, which
// verifies, traces and runs them. Header-only so that the compiler needs no
// runtime library.
#ifndef MEGRT_COLLECTIVES_H
#define MEGRT_COLLECTIVES_H

#include <cstdint>
#include <string_view>

namespace megrt {

enum class CollectiveId : uint8_t {
#define MEGRT_COLLECTIVE(Id, name, source, destination, reduces, inPlace,      \
                         form, sent, params)                                   \
  Id,
#include "megrt/Collectives.def"
#undef MEGRT_COLLECTIVE
};

/// How the runtime runs a collective (Collectives.def's `form`).
enum class CollectiveForm : uint8_t { Group, Local, Shift, Send, Receive };

/// What a rank of a collective sends (Collectives.def's `sent`).
enum class CollectiveTraffic : uint8_t { None, Share, TwiceShare, Source };

struct CollectiveInfo {
  CollectiveId id;
  /// The artifact's and the printed program's name.
  const char *name;
  /// Whether the source (destination) holds count times the group size
  /// elements rather than count.
  bool sourceWhole, destinationWhole;
  bool reduces, inPlace;
  CollectiveForm form;
  /// Needs a communicator (every form but Local).
  bool communicates;
  CollectiveTraffic sent;
  /// The integer parameters a command of it carries.
  int params;

  uint64_t sourceElements(uint64_t count, uint64_t groupSize) const {
    return sourceWhole ? count * groupSize : count;
  }
  uint64_t destinationElements(uint64_t count, uint64_t groupSize) const {
    return destinationWhole ? count * groupSize : count;
  }
  /// The larger of the two buffers, in elements.
  uint64_t largerElements(uint64_t count, uint64_t groupSize) const {
    return sourceWhole || destinationWhole ? count * groupSize : count;
  }
  /// The elements a rank sends.
  double sentElements(uint64_t count, uint64_t groupSize) const {
    double share = groupSize > 1 ? double(groupSize - 1) / groupSize : 0.0;
    double larger = static_cast<double>(largerElements(count, groupSize));
    switch (sent) {
    case CollectiveTraffic::Share:
      return share * larger;
    case CollectiveTraffic::TwiceShare:
      return 2 * share * larger;
    case CollectiveTraffic::Source:
      return groupSize > 1
                 ? static_cast<double>(sourceElements(count, groupSize))
                 : 0.0;
    case CollectiveTraffic::None:
      break;
    }
    return 0;
  }
};

namespace detail {
constexpr bool kWhole1 = false, kWholeG = true;
} // namespace detail

inline constexpr CollectiveInfo kCollectives[] = {
#define MEGRT_COLLECTIVE(Id, name, source, destination, reduces, inPlace,      \
                         form, sent, params)                                   \
  {CollectiveId::Id,                                                           \
   name,                                                                       \
   detail::kWhole##source,                                                     \
   detail::kWhole##destination,                                                \
   reduces,                                                                    \
   inPlace,                                                                    \
   CollectiveForm::form,                                                       \
   CollectiveForm::form != CollectiveForm::Local,                              \
   CollectiveTraffic::sent,                                                    \
   params},
#include "megrt/Collectives.def"
#undef MEGRT_COLLECTIVE
};

inline constexpr size_t kNumCollectives =
    sizeof(kCollectives) / sizeof(kCollectives[0]);

inline const CollectiveInfo &collectiveInfo(CollectiveId id) {
  return kCollectives[static_cast<size_t>(id)];
}

/// The collective the artifact names `name`, or null.
inline const CollectiveInfo *findCollective(std::string_view name) {
  for (const CollectiveInfo &info : kCollectives)
    if (name == info.name)
      return &info;
  return nullptr;
}

} // namespace megrt

#endif // MEGRT_COLLECTIVES_H

// Checks that the ranks of a run agree on what they run: the same artifact
// (at Session construction) and the same settings (Session::agree), before
// a collective could pair up mismatched work.
#ifndef MEGRT_SRC_RANKAGREEMENT_H
#define MEGRT_SRC_RANKAGREEMENT_H

#include "comm/Communicator.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megrt {

/// "rank 3" or "ranks 0, 1, 2".
std::string joinRanks(const std::vector<int> &ranks);

/// Fails on every rank unless every rank's artifact has the same checksum,
/// naming the ranks by the artifact they loaded.
void checkSameArtifact(uint64_t checksum, comm::World &world);

/// Fails on every rank at once unless every rank passed the same settings
/// (name, value; the same names in the same order): the error names the
/// first setting that differs and the ranks with each value. Collective.
void checkSameSettings(
    const std::vector<std::pair<std::string, std::string>> &settings,
    comm::World &world);

} // namespace megrt

#endif // MEGRT_SRC_RANKAGREEMENT_H

// What identifies a file's content cheaply, for ranks (or runs) to compare
// the files they were given without reading them whole.
#ifndef MEGRT_FILEIDENTITY_H
#define MEGRT_FILEIDENTITY_H

#include <string>

namespace megrt {

/// "N bytes, hash H": the size and a 64-bit FNV-1a hash of the first and
/// the last MiB (the whole of a smaller file). For a directory, the names
/// and identities of its regular files (sorted, not recursive); for an
/// indexed dataset's prefix (PREFIX.idx exists), those of PREFIX.idx and
/// PREFIX.bin. Two files with equal identities are almost surely equal when
/// they were written whole; a change in the middle of a large file alone
/// goes unseen. Throws megrt::Error naming a path that cannot be read.
std::string fileIdentity(const std::string &path);

} // namespace megrt

#endif // MEGRT_FILEIDENTITY_H

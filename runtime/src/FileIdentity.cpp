// File identities (see megrt/FileIdentity.h).
#include "megrt/FileIdentity.h"

#include "Fail.h"
#include "megrt/Fnv1a.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

namespace megrt {
namespace {

constexpr uint64_t kBlock = 1 << 20;

std::string regularFileIdentity(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fail("cannot read '", path, "': ", std::strerror(errno));
  file.seekg(0, std::ios::end);
  auto size = static_cast<uint64_t>(file.tellg());
  std::vector<char> block(std::min(size, kBlock));
  uint64_t hash = kFnv1aBasis;
  auto read = [&](uint64_t offset) {
    file.seekg(static_cast<std::streamoff>(offset));
    file.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (!file)
      fail("cannot read '", path, "' at byte ", offset);
    hash = fnv1a(block.data(), block.size(), hash);
  };
  read(0);
  if (size > kBlock)
    read(size - kBlock);
  std::ostringstream os;
  os << size << " bytes, hash " << std::hex << std::setw(16)
     << std::setfill('0') << hash;
  return os.str();
}

} // namespace

std::string fileIdentity(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (fs::is_regular_file(status))
    return regularFileIdentity(path);
  std::vector<std::string> names;
  if (fs::is_directory(status)) {
    for (const fs::directory_entry &entry : fs::directory_iterator(path, error))
      if (entry.is_regular_file(error))
        names.push_back(entry.path().filename().string());
    if (error)
      fail("cannot list '", path, "': ", error.message());
    std::sort(names.begin(), names.end());
    std::string identity = "directory";
    for (const std::string &name : names)
      identity += concat("; ", name, ": ",
                         regularFileIdentity((fs::path(path) / name).string()));
    return identity;
  }
  if (fs::is_regular_file(path + ".idx", error))
    return concat("index ", regularFileIdentity(path + ".idx"), "; data ",
                  regularFileIdentity(path + ".bin"));
  fail("cannot read '", path, "': no such file or directory");
}

} // namespace megrt

// Checks that the ranks of a run agree on what they run.
#include "RankAgreement.h"

#include "Fail.h"

#include <algorithm>
#include <cstring>

namespace megrt {
namespace {

/// The ranks of each distinct value, in order of each value's first rank.
template <typename T>
std::vector<std::pair<T, std::vector<int>>>
groupRanks(const std::vector<T> &values) {
  std::vector<std::pair<T, std::vector<int>>> groups;
  for (int rank = 0; rank < static_cast<int>(values.size()); ++rank) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](auto &group) {
      return group.first == values[rank];
    });
    if (same == groups.end())
      groups.push_back({values[rank], {rank}});
    else
      same->second.push_back(rank);
  }
  return groups;
}

/// Every rank's `bytes`, gathered (the lengths first, then the bytes padded
/// to the longest).
std::vector<std::string> gatherStrings(const std::string &bytes,
                                       comm::World &world) {
  size_t ranks = static_cast<size_t>(world.size());
  uint64_t mine = bytes.size();
  std::vector<uint64_t> sizes(ranks);
  world.allGatherBytes(&mine, sizes.data(), sizeof mine);
  uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  if (longest > (uint64_t(1) << 24))
    fail("the settings to compare across ranks take ", longest,
         " bytes on one rank; at most 16 MiB");
  std::string padded = bytes;
  padded.resize(longest);
  std::string all(longest * ranks, '\0');
  if (longest)
    world.allGatherBytes(padded.data(), all.data(), longest);
  std::vector<std::string> out;
  for (size_t rank = 0; rank < ranks; ++rank)
    out.push_back(all.substr(rank * longest, sizes[rank]));
  return out;
}

/// Names and values, each as its length (8 bytes) and bytes.
std::string encode(
    const std::vector<std::pair<std::string, std::string>> &settings) {
  std::string out;
  auto put = [&](const std::string &text) {
    uint64_t size = text.size();
    out.append(reinterpret_cast<const char *>(&size), sizeof size);
    out += text;
  };
  for (const auto &[name, value] : settings) {
    put(name);
    put(value);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>>
decode(const std::string &bytes) {
  std::vector<std::pair<std::string, std::string>> settings;
  size_t at = 0;
  auto take = [&](std::string &text) {
    uint64_t size = 0;
    std::memcpy(&size, bytes.data() + at, sizeof size);
    at += sizeof size;
    text = bytes.substr(at, size);
    at += size;
  };
  while (at < bytes.size()) {
    std::pair<std::string, std::string> setting;
    take(setting.first);
    take(setting.second);
    settings.push_back(std::move(setting));
  }
  return settings;
}

/// A value for a message: quoted, long ones cut.
std::string quoted(const std::string &value) {
  constexpr size_t kShown = 160;
  if (value.size() <= kShown)
    return "'" + value + "'";
  return "'" + value.substr(0, kShown) + "...'";
}

} // namespace

std::string joinRanks(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += concat(i ? ", " : "", ranks[i]);
  return text;
}

void checkSameArtifact(uint64_t checksum, comm::World &world) {
  std::vector<uint64_t> all(static_cast<size_t>(world.size()));
  world.allGatherBytes(&checksum, all.data(), sizeof checksum);
  auto loaded = groupRanks(all);
  if (loaded.size() == 1)
    return;
  std::string groups;
  for (const auto &[sum, ranks] : loaded)
    groups += concat(groups.empty() ? "" : "; ", joinRanks(ranks),
                     " loaded the artifact with checksum ", std::hex, sum,
                     std::dec);
  fail("the ranks loaded different artifacts (", groups,
       "): every rank must load the same .megc file");
}

void checkSameSettings(
    const std::vector<std::pair<std::string, std::string>> &settings,
    comm::World &world) {
  std::vector<std::string> gathered = gatherStrings(encode(settings), world);
  std::vector<std::vector<std::pair<std::string, std::string>>> all;
  for (const std::string &bytes : gathered)
    all.push_back(decode(bytes));
  // The names must line up before values can be compared.
  std::vector<std::string> names;
  for (const auto &rank : all) {
    std::string list;
    for (const auto &setting : rank)
      list += (list.empty() ? "" : ", ") + setting.first;
    names.push_back(list);
  }
  auto byNames = groupRanks(names);
  if (byNames.size() > 1) {
    std::string groups;
    for (const auto &[list, ranks] : byNames)
      groups += concat(groups.empty() ? "" : "; ", joinRanks(ranks),
                       " compared (", list, ")");
    fail("the ranks compared different settings (", groups,
         "): every rank must run the same version of the program");
  }
  for (size_t i = 0; i < settings.size(); ++i) {
    std::vector<std::string> values;
    for (const auto &rank : all)
      values.push_back(rank[i].second);
    auto byValue = groupRanks(values);
    if (byValue.size() == 1)
      continue;
    std::string groups;
    for (const auto &[value, ranks] : byValue)
      groups += concat(groups.empty() ? "" : "; ", joinRanks(ranks), " ",
                       quoted(value));
    fail("the ranks differ in ", settings[i].first, " (", groups,
         "): every rank of a run must be given the same; no step was run");
  }
}

} // namespace megrt

// Per-rank shards and a commit record (DistributedCheckpoint.h).
#include "DistributedCheckpoint.h"

#include "Fail.h"
#include "FileIO.h"
#include "Json.h"
#include "TensorChecks.h"
#include "comm/Communicator.h"
#include "megrt/Checkpoint.h"
#include "megrt/Safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

namespace megrt {
namespace {

constexpr const char *kFormat = "megc distributed checkpoint";
constexpr int64_t kVersion = 1;

std::string shardFileName(int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank-%05d.safetensors", rank);
  return name;
}

std::string recordPath(const std::string &dir) {
  return (std::filesystem::path(dir) / kCommitRecordName).string();
}

/// Every rank's `text`, on every rank (rank order); collective.
std::vector<std::string> gatherTexts(comm::World *world,
                                     const std::string &text) {
  if (!world || world->size() == 1)
    return {text};
  auto ranks = static_cast<size_t>(world->size());
  uint64_t length = text.size();
  std::vector<uint64_t> lengths(ranks);
  world->allGatherBytes(&length, lengths.data(), sizeof(length));
  uint64_t longest = 0;
  for (uint64_t each : lengths)
    longest = std::max(longest, each);
  std::vector<std::string> texts(ranks);
  if (longest == 0)
    return texts;
  std::string padded = text;
  padded.resize(longest);
  std::string all(longest * ranks, '\0');
  world->allGatherBytes(padded.data(), all.data(), longest);
  for (size_t r = 0; r < ranks; ++r)
    texts[r] = all.substr(r * longest, lengths[r]);
  return texts;
}

/// The first rank's error among `texts` ("error\n" + message), or -1.
int firstFailure(const std::vector<std::string> &texts) {
  for (size_t r = 0; r < texts.size(); ++r)
    if (texts[r].rfind("error\n", 0) == 0)
      return static_cast<int>(r);
  return -1;
}

std::string shapeJson(const Shape &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "," : "") + std::to_string(shape[d]);
  return text + "]";
}

/// How the saving mesh laid a parameter out: what the FSDP strategy and
/// tensor or expert parallelism made of it.
std::string layoutOf(const Program &program, const ParameterSpec &spec) {
  if (!spec.sharding)
    return "replicated";
  auto over = [&](uint32_t submesh) {
    std::string axes;
    for (const std::string &axis : program.submeshes().at(submesh).axes)
      axes += (axes.empty() ? "" : ", ") + axis;
    return "[" + axes + "]";
  };
  const ShardingSpec &sharding = *spec.sharding;
  if (!sharding.dim)
    return "flattened pieces over " + over(sharding.submesh);
  std::string blocks = concat(
      "blocks along dim ", *sharding.dim, " over ",
      over(sharding.blockSubmesh ? *sharding.blockSubmesh : sharding.submesh));
  if (!sharding.blockSubmesh)
    return blocks;
  return "flattened pieces over " + over(sharding.submesh) + " of " + blocks;
}

/// One chunk of the record: the tensor, its file and bytes, its elements.
std::string chunkJson(const std::string &tensor, const std::string &file,
                      std::pair<uint64_t, uint64_t> bytes,
                      const PieceGeometry &piece) {
  return concat("{\"tensor\":", quoteJson(tensor),
                ",\"file\":", quoteJson(file), ",\"data_offsets\":[",
                bytes.first, ",", bytes.second, "],\"dim\":", piece.dim,
                ",\"blocks\":", piece.blocks, ",\"block\":", piece.block,
                ",\"first\":", piece.first, ",\"count\":", piece.count, "}");
}

struct Chunk {
  std::string file;
  uint64_t begin, end;
  PieceGeometry piece;
  std::vector<ElementRun> runs;
};

struct RecordTensor {
  DType dtype;
  Shape shape;
  std::vector<Chunk> chunks;
};

/// A parsed and checked commit record.
struct Record {
  std::map<std::string, RecordTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string mesh;
};

Record readRecord(const std::string &dir) {
  std::string path = recordPath(dir);
  if (!std::filesystem::exists(path))
    fail("'", dir, "' is not a complete distributed checkpoint: it has no ",
         kCommitRecordName, " (a save that did not finish)");
  std::vector<uint8_t> bytes = readFile(path);
  std::string what = concat("checkpoint record '", path, "'");
  JsonValue root;
  try {
    root = parseJson(std::string_view(
        reinterpret_cast<const char *>(bytes.data()), bytes.size()));
  } catch (const Error &error) {
    fail(what, ": ", error.what());
  }
  if (requireJsonMember(root, "format", JsonValue::Kind::String, what).text !=
      kFormat)
    fail(what, ": \"format\" is not \"", kFormat, "\"");
  int64_t version = jsonToInt64(
      requireJsonMember(root, "version", JsonValue::Kind::Number, what),
      what + " version");
  if (version != kVersion)
    fail(what, ": version ", version, ", this megrt reads version ", kVersion);
  Record record;
  record.mesh =
      requireJsonMember(root, "mesh", JsonValue::Kind::String, what).text;
  for (const auto &[key, value] :
       requireJsonMember(root, "metadata", JsonValue::Kind::Object, what)
           .members) {
    if (value.kind != JsonValue::Kind::String)
      fail(what, ": metadata \"", key, "\" is ", value.kindName(),
           ", expected a string");
    record.metadata[key] = value.text;
  }
  for (const auto &[name, info] :
       requireJsonMember(root, "tensors", JsonValue::Kind::Object, what)
           .members) {
    std::string where = concat(what, ": tensor '", name, "'");
    const std::string &dtype =
        requireJsonMember(info, "dtype", JsonValue::Kind::String, where).text;
    std::optional<DType> parsed = parseDType(dtype);
    if (!parsed)
      fail(where, ": unknown dtype '", dtype, "'");
    RecordTensor tensor{*parsed, {}, {}};
    for (const JsonValue &extent :
         requireJsonMember(info, "shape", JsonValue::Kind::Array, where)
             .elements)
      tensor.shape.push_back(jsonToInt64(extent, where + " shape"));
    PieceGeometry::whole(tensor.shape).check(where);
    record.tensors.emplace(name, std::move(tensor));
  }
  const JsonValue &chunks =
      requireJsonMember(root, "chunks", JsonValue::Kind::Array, what);
  for (size_t c = 0; c < chunks.elements.size(); ++c) {
    const JsonValue &info = chunks.elements[c];
    std::string where = concat(what, ": chunk ", c);
    const std::string &name =
        requireJsonMember(info, "tensor", JsonValue::Kind::String, where).text;
    auto tensor = record.tensors.find(name);
    if (tensor == record.tensors.end())
      fail(where, " names tensor '", name, "', which the record lacks");
    Chunk chunk;
    chunk.file =
        requireJsonMember(info, "file", JsonValue::Kind::String, where).text;
    if (chunk.file.empty() || chunk.file.find('/') != std::string::npos ||
        chunk.file[0] == '.')
      fail(where, ": file '", chunk.file, "' is not a file of the directory");
    auto number = [&](const char *key) {
      return jsonToInt64(
          requireJsonMember(info, key, JsonValue::Kind::Number, where),
          concat(where, " ", key));
    };
    const JsonValue &offsets =
        requireJsonMember(info, "data_offsets", JsonValue::Kind::Array, where);
    if (offsets.elements.size() != 2)
      fail(where, ": \"data_offsets\" needs 2 elements");
    int64_t begin = jsonToInt64(offsets.elements[0], where + " data_offsets");
    int64_t end = jsonToInt64(offsets.elements[1], where + " data_offsets");
    chunk.piece.full = tensor->second.shape;
    chunk.piece.dim = static_cast<int>(number("dim"));
    chunk.piece.blocks = number("blocks");
    chunk.piece.block = number("block");
    chunk.piece.first = number("first");
    chunk.piece.count = number("count");
    chunk.piece.check(where + " of tensor '" + name + "'");
    uint64_t bytes = static_cast<uint64_t>(chunk.piece.count) *
                     elementSize(tensor->second.dtype);
    if (begin < 0 || end < begin || static_cast<uint64_t>(end - begin) != bytes)
      fail(where, ": data_offsets [", begin, ", ", end, "] do not span the ",
           bytes, " bytes of its ", chunk.piece.count, " elements");
    chunk.begin = static_cast<uint64_t>(begin);
    chunk.end = static_cast<uint64_t>(end);
    chunk.runs = elementRuns(chunk.piece);
    tensor->second.chunks.push_back(std::move(chunk));
  }
  return record;
}

/// The files a record names, each open once.
class ShardFiles {
public:
  explicit ShardFiles(std::string dir) : dir_(std::move(dir)) {}
  const InputFile &get(const std::string &name) {
    std::unique_ptr<InputFile> &file = files_[name];
    if (!file)
      file = std::make_unique<InputFile>(
          (std::filesystem::path(dir_) / name).string());
    return *file;
  }

private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<InputFile>> files_;
};

} // namespace

bool isDistributedCheckpoint(const std::string &path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error) &&
         std::filesystem::exists(recordPath(path), error);
}

void checkCheckpoint(const std::string &path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) {
    checkSafetensors(path);
    return;
  }
  Record record = readRecord(path);
  ShardFiles files(path);
  for (const auto &[name, tensor] : record.tensors)
    for (const Chunk &chunk : tensor.chunks)
      if (files.get(chunk.file).size() < chunk.end)
        fail("checkpoint '", path, "': shard file '", chunk.file,
             "' ends before the bytes of tensor '", name, "' it should hold");
}

ShardSnapshot snapshotShard(const ParameterStore &store, const Program &program,
                            bool withState, std::vector<uint8_t> *staging) {
  // The pieces this rank holds the first copy of, without the padding of
  // flattened pieces.
  ShardSnapshot snapshot;
  const std::vector<ParameterSpec> &specs = program.parameters();
  for (size_t i = 0; i < specs.size(); ++i) {
    if ((!withState && specs[i].state) ||
        !store.holdsFirstCopy(i, store.rank()))
      continue;
    PieceGeometry piece = store.geometry(i, store.rank());
    if (piece.count == 0)
      continue;
    Shape shape = specs[i].shape;
    if (specs[i].sharding && specs[i].sharding->flat())
      shape = {piece.count};
    snapshot.entries.push_back(
        {specs[i].name, specs[i].dtype, shape, store.read(i).data()});
    snapshot.pieces.push_back(std::move(piece));
    snapshot.bytes += static_cast<uint64_t>(snapshot.pieces.back().count) *
                      elementSize(specs[i].dtype);
  }
  if (!staging)
    return snapshot;
  // One area, kept by the caller from save to save, so that a save every
  // step does not fault in fresh pages each time.
  staging->resize(snapshot.bytes);
  uint8_t *at = staging->data();
  for (size_t e = 0; e < snapshot.entries.size(); ++e) {
    size_t bytes = static_cast<size_t>(snapshot.pieces[e].count) *
                   elementSize(snapshot.entries[e].dtype);
    std::memcpy(at, snapshot.entries[e].data, bytes);
    snapshot.entries[e].data = at;
    at += bytes;
  }
  return snapshot;
}

void prepareDistributedCheckpoint(const ParameterStore &store,
                                  const std::string &dir) {
  // Rank 0 un-commits an earlier checkpoint in `dir` (durably) before any
  // rank replaces a shard of it, so that a crash from here on never leaves
  // a record over shards of two saves.
  std::string status = "ok\n";
  try {
    std::filesystem::create_directories(dir);
    if (store.rank() == 0)
      removeFile(recordPath(dir));
  } catch (const std::exception &error) {
    status = concat("error\n", "cannot prepare the checkpoint directory '", dir,
                    "': ", error.what());
  }
  std::vector<std::string> prepared = gatherTexts(store.world(), status);
  if (int failed = firstFailure(prepared); failed >= 0)
    fail("rank ", failed, ": ", prepared[failed].substr(6));
}

std::string writeShard(const std::string &dir, int rank,
                       const ShardSnapshot &snapshot) {
  std::string file = shardFileName(rank);
  std::string chunks = "ok\n";
  try {
    if (!snapshot.entries.empty()) {
      auto ranges = writeSafetensors(
          (std::filesystem::path(dir) / file).string(), snapshot.entries);
      for (size_t e = 0; e < snapshot.entries.size(); ++e)
        chunks += (e ? "," : "") + chunkJson(snapshot.entries[e].name, file,
                                             ranges[e], snapshot.pieces[e]);
    }
  } catch (const std::exception &error) {
    chunks = concat("error\n", error.what());
  }
  return chunks;
}

void commitDistributedCheckpoint(
    const ParameterStore &store, const Program &program, const std::string &dir,
    bool withState, const std::map<std::string, std::string> &metadata,
    const std::string &outcome) {
  comm::World *world = store.world();
  int ranks = world ? world->size() : 1;
  const std::vector<ParameterSpec> &specs = program.parameters();
  // Every rank's file is durable (writeFile flushed it) once every rank
  // has answered; then rank 0 commits.
  std::vector<std::string> written = gatherTexts(world, outcome);
  if (int failed = firstFailure(written); failed >= 0)
    fail("the checkpoint '", dir, "' is incomplete: rank ", failed, ": ",
         written[failed].substr(6));
  std::string committed = "ok\n";
  if (store.rank() == 0) {
    try {
      std::string text = concat(
          "{\"format\":", quoteJson(kFormat), ",\"version\":", kVersion,
          ",\"mesh\":", quoteJson(program.describeMesh()), ",\"ranks\":", ranks,
          ",\"training_state\":", withState ? "true" : "false",
          ",\"metadata\":{");
      bool first = true;
      for (const auto &[key, value] : metadata) {
        text += (first ? "" : ",") + quoteJson(key) + ":" + quoteJson(value);
        first = false;
      }
      text += "},\n\"tensors\":{";
      first = true;
      for (const ParameterSpec &spec : specs) {
        if (!withState && spec.state)
          continue;
        text +=
            concat(first ? "\n" : ",\n", quoteJson(spec.name),
                   ":{\"dtype\":", quoteJson(dtypeName(spec.dtype)),
                   ",\"shape\":", shapeJson(ParameterStore::fileShape(spec)),
                   ",\"layout\":", quoteJson(layoutOf(program, spec)), "}");
        first = false;
      }
      text += "},\n\"chunks\":[";
      first = true;
      for (const std::string &each : written) {
        std::string list = each.substr(3);
        if (list.empty())
          continue;
        text += (first ? "\n" : ",\n") + list;
        first = false;
      }
      text += "]}\n";
      writeFile(recordPath(dir), {{text.data(), text.size()}});
    } catch (const std::exception &error) {
      committed = concat("error\n", error.what());
    }
  }
  std::vector<std::string> answers = gatherTexts(world, committed);
  if (firstFailure(answers) == 0)
    fail("the checkpoint '", dir, "' is incomplete: ", answers[0].substr(6));
}

void saveDistributedCheckpoint(
    const ParameterStore &store, const Program &program, const std::string &dir,
    bool withState, const std::map<std::string, std::string> &metadata) {
  prepareDistributedCheckpoint(store, dir);
  ShardSnapshot snapshot =
      snapshotShard(store, program, withState, /*staging=*/nullptr);
  commitDistributedCheckpoint(store, program, dir, withState, metadata,
                              writeShard(dir, store.rank(), snapshot));
}

void loadDistributedCheckpoint(ParameterStore &store, const Program &program,
                               const std::string &dir, bool allowExtra,
                               bool withState, bool checkFiniteValues,
                               std::map<std::string, std::string> *metadata) {
  Record record = readRecord(dir);
  ShardFiles files(dir);
  const std::vector<ParameterSpec> &specs = program.parameters();
  std::set<std::string> known;
  // Every wanted piece is read and checked before any is written, so that
  // a bad checkpoint leaves the parameters as they were.
  std::vector<std::optional<Tensor>> loaded(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec &spec = specs[i];
    known.insert(spec.name);
    known.insert(spec.aliases.begin(), spec.aliases.end());
    if (!withState && spec.state)
      continue;
    auto found = record.tensors.find(spec.name);
    for (size_t a = 0; found == record.tensors.end() && a < spec.aliases.size();
         ++a)
      found = record.tensors.find(spec.aliases[a]);
    const Shape &whole = ParameterStore::fileShape(spec);
    if (found == record.tensors.end())
      fail("'", dir, "': missing parameter '", spec.name, "' (expected ",
           formatType(spec.dtype, whole), ")");
    const RecordTensor &tensor = found->second;
    std::string what = concat("'", dir, "': parameter '", spec.name, "'");
    if (tensor.shape != whole)
      fail(what, " is ", formatType(tensor.dtype, tensor.shape), ", expected ",
           formatType(spec.dtype, whole));
    bool convert = tensor.dtype != spec.dtype;
    if (convert && (spec.state || !isFloatingPoint(tensor.dtype) ||
                    !isFloatingPoint(spec.dtype)))
      fail(what, " is ", formatType(tensor.dtype, tensor.shape), ", expected ",
           formatType(spec.dtype, whole));
    // This rank's piece in the file's dtype, zero in its padding, from the
    // byte ranges of the chunks it overlaps.
    PieceGeometry piece = store.geometry(i, store.rank());
    std::vector<ElementRun> runs = elementRuns(piece);
    Tensor value(tensor.dtype, spec.shape);
    size_t bytes = elementSize(tensor.dtype);
    int64_t covered = 0;
    for (const Chunk &chunk : tensor.chunks) {
      const InputFile &input = files.get(chunk.file);
      covered += forEachSharedRun(
          runs, chunk.runs, [&](int64_t mine, int64_t theirs, int64_t count) {
            input.read(chunk.begin + static_cast<uint64_t>(theirs) * bytes,
                       value.data() + static_cast<size_t>(mine) * bytes,
                       static_cast<size_t>(count) * bytes);
          });
    }
    if (covered != piece.count)
      fail(what, ": its chunks hold ", covered, " of the ", piece.count,
           " elements this rank needs",
           covered > piece.count ? " (chunks overlap)" : "");
    if (convert)
      value = Tensor::fromFloats(spec.dtype, spec.shape, value.toFloats());
    if (checkFiniteValues)
      checkFinite(value, what);
    if (spec.nonNegative)
      checkNonNegative(value, what);
    loaded[i] = std::move(value);
  }
  if (!allowExtra)
    for (const auto &[name, tensor] : record.tensors)
      if (!known.count(name))
        fail("'", dir, "': tensor '", name,
             "' is not a parameter of the program (pass allowExtra to "
             "ignore it)");
  for (size_t i = 0; i < specs.size(); ++i)
    if (loaded[i])
      store.write(i, loaded[i]->data());
  if (!withState)
    store.refreshCopies();
  if (metadata)
    *metadata = record.metadata;
}

} // namespace megrt

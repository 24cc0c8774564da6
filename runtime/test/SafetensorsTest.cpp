// safetensors files: round trips, hand-written files, and every rejection.
#include "megrt/Safetensors.h"
#include "ArtifactBuilder.h"
#include "FileIO.h"
#include "TestFiles.h"
#include "megrt/Error.h"
#include "megrt/Session.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

/// A file as another writer would lay it out: length, header, data.
std::vector<uint8_t> safetensorsBytes(const std::string &header,
                                      const std::vector<uint8_t> &data) {
  std::vector<uint8_t> bytes(8 + header.size() + data.size());
  uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  if (!data.empty())
    std::memcpy(bytes.data() + 8 + header.size(), data.data(), data.size());
  return bytes;
}

std::string readError(const std::vector<uint8_t> &bytes, std::string &pathOut) {
  pathOut = tempPath("file.safetensors");
  writeBytes(pathOut, bytes);
  try {
    readSafetensors(pathOut);
  } catch (const Error &error) {
    return error.what();
  }
  return "(read)";
}

std::string readError(const std::vector<uint8_t> &bytes) {
  std::string path;
  return readError(bytes, path);
}

std::vector<uint8_t> floatBytes(const std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  std::string path = tempPath("hand.safetensors");
  std::vector<uint8_t> data = floatBytes({1.5f, -2.0f});
  data.push_back(7);
  data.push_back(0);
  writeBytes(path,
             safetensorsBytes(
                 "{\"__metadata__\":{\"format\":\"pt\"},"
                 "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
                 "8]},\"h\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":"
                 "[8,10]}}   ",
                 data));
  std::map<std::string, Tensor> tensors = readSafetensors(path);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("w").toFloats(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(tensors.at("h").dtype(), DType::BF16);
  EXPECT_EQ(tensors.at("h").shape(), Shape{});
  EXPECT_EQ(tensors.at("h").dataAs<uint16_t>()[0], 7);
}

TEST(Safetensors, RoundTripsEveryDType) {
  std::map<std::string, Tensor> tensors = {
      {"f32", Tensor::fromFloats(DType::F32, {2, 3}, testValues(6, 1))},
      {"bf16", Tensor::fromFloats(DType::BF16, {5}, testValues(5, 2))},
      {"f16", Tensor::fromFloats(DType::F16, {1, 1, 3}, testValues(3, 3))},
      {"i32", Tensor::fromInt32({3}, {1, -2, 2147483647})},
      {"i64", Tensor::fromInt64({2}, {-1, 1ll << 40})},
      {"empty", Tensor(DType::F32, {0, 4})},
      {"name with \"quotes\"\n", Tensor::fromInt32({}, {5})}};
  std::string path = tempPath("all.safetensors");
  writeSafetensors(path, tensors, {{"producer", "megrt"}});
  std::vector<uint8_t> bytes = readBytes(path);
  uint64_t headerBytes;
  std::memcpy(&headerBytes, bytes.data(), 8);
  EXPECT_EQ((8 + headerBytes) % 8, 0u) << "data section must be 8-aligned";
  EXPECT_EQ(readSafetensors(path), tensors);

  std::string again = tempPath("again.safetensors");
  writeSafetensors(again, readSafetensors(path), {{"producer", "megrt"}});
  EXPECT_EQ(readBytes(again), bytes);
}

TEST(Safetensors, RejectsTruncatedFiles) {
  std::string path = tempPath("full.safetensors");
  writeSafetensors(
      path, {{"w", Tensor::fromFloats(DType::F32, {4}, testValues(4, 1))}});
  std::vector<uint8_t> bytes = readBytes(path);
  std::string cutPath;
  std::string error = readError({bytes.begin(), bytes.begin() + 5}, cutPath);
  EXPECT_EQ(error,
            "safetensors file '" + cutPath +
                "' is truncated: 5 bytes, expected at least 8 for the header "
                "length");
  EXPECT_THAT(readError({bytes.begin(), bytes.begin() + 20}),
              HasSubstr("is truncated: header length"));
  // Cutting into the data leaves the tensor reaching past the end.
  EXPECT_THAT(readError({bytes.begin(), bytes.end() - 1}),
              HasSubstr("data_offsets [0, 16] are out of range for a data "
                        "section of 15 bytes"));
}

TEST(Safetensors, RejectsNamesThatAreNotCleanUtf8) {
  std::vector<uint8_t> data = floatBytes({1, 2});
  auto header = [](const std::string &name) {
    return "{\"" + name +
           "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  };
  EXPECT_THAT(readError(safetensorsBytes(header("a\\u0000b"), data)),
              HasSubstr("a tensor name is not valid UTF-8 or holds a NUL "
                        "byte"));
  // Raw bytes that are not UTF-8 (a stray byte, an overlong '/', a surrogate
  // encoded directly) are already bad JSON.
  for (const std::string &name : {std::string("w\xff"), std::string("\xc0\xaf"),
                                  std::string("\xed\xa0\x80")})
    EXPECT_THAT(readError(safetensorsBytes(header(name), data)),
                HasSubstr("invalid UTF-8 in string"))
        << name;
  EXPECT_EQ(readError(safetensorsBytes(header("caf\xc3\xa9.w"), data)),
            "(read)");
}

TEST(Safetensors, RejectsBadOffsets) {
  std::vector<uint8_t> data = floatBytes({1, 2, 3, 4});
  EXPECT_THAT(
      readError(safetensorsBytes(
          "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}",
          data)),
      HasSubstr("tensor 'w': data_offsets [0, 12] span 12 bytes, but f32[2] "
                "needs 8"));
  EXPECT_THAT(
      readError(safetensorsBytes(
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
          data)),
      HasSubstr("tensor 'b' starts at data byte 4, expected 8 (tensors must "
                "not overlap or leave gaps)"));
  EXPECT_THAT(
      readError(safetensorsBytes(
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
          data)),
      HasSubstr("tensors cover 8 bytes of a data section of 16 bytes"));
  EXPECT_THAT(
      readError(safetensorsBytes(
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}",
          data)),
      HasSubstr("data_offsets [-8, 0] are out of range"));
}

TEST(Safetensors, RejectsMalformedHeaders) {
  std::vector<uint8_t> data = floatBytes({1, 2});
  EXPECT_THAT(readError(safetensorsBytes("{\"w\":{\"dtype\":\"F64\",\"shape\":"
                                         "[1],\"data_offsets\":[0,8]}}",
                                         data)),
              HasSubstr("tensor 'w' has dtype 'F64', which megrt does not "
                        "support"));
  EXPECT_THAT(readError(safetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":"
                                         "[2]}}",
                                         data)),
              HasSubstr("tensor 'w': missing \"data_offsets\""));
  EXPECT_THAT(readError(safetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":"
                                         "[2.5],\"data_offsets\":[0,8]}}",
                                         data)),
              HasSubstr("expected an integer, found 2.5"));
  EXPECT_THAT(readError(safetensorsBytes("{\"w\": [", data)),
              HasSubstr(": header: invalid JSON at byte"));
  EXPECT_THAT(readError(safetensorsBytes("[1, 2]", data)),
              HasSubstr("header is an array, expected an object"));
  std::vector<uint8_t> huge = safetensorsBytes("{}", data);
  huge[6] = 1;
  EXPECT_THAT(readError(huge), HasSubstr("exceeds the limit"));
}

/// InputFile reads at offsets, names the file when a read lies past its
/// end, and reads a pipe (which it cannot seek) whole.
TEST(InputFile, ReadsAtOffsetsAndPipes) {
  std::string path = tempPath("input-file.bin");
  writeBytes(path, {1, 2, 3, 4, 5, 6, 7});
  InputFile file(path);
  EXPECT_EQ(file.size(), 7u);
  uint8_t got[3] = {};
  file.read(4, got, 3);
  EXPECT_EQ(std::vector<uint8_t>(got, got + 3),
            (std::vector<uint8_t>{5, 6, 7}));
  try {
    file.read(5, got, 3);
    ADD_FAILURE() << "read past the end";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot read '" + path +
                  "': bytes [5, 8) lie past its end (7 bytes)");
  }
  EXPECT_THROW(InputFile(tempPath("no-such-file.bin")), Error);

  // A safetensors file through a pipe reads as the file itself does.
  std::map<std::string, Tensor> tensors = {
      {"a", Tensor::fromFloats(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})},
      {"b", Tensor::fromFloats(DType::BF16, {4}, {-1, 0.5f, 8, 0})}};
  std::string saved = tempPath("through-a-pipe.safetensors");
  writeSafetensors(saved, tensors);
  std::vector<uint8_t> bytes = readBytes(saved);
  std::string fifo = tempPath("pipe");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { writeBytes(fifo, bytes); });
  std::map<std::string, Tensor> read = readSafetensors(fifo);
  writer.join();
  ::unlink(fifo.c_str());
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read.at("a"), tensors.at("a"));
  EXPECT_EQ(read.at("b"), tensors.at("b"));
}

/// Tensors written from where they are: in name order whatever the order
/// given (the same bytes as from a map), each name once.
TEST(Safetensors, WritesTensorsHeldElsewhere) {
  Tensor a = Tensor::fromFloats(DType::F32, {2}, {1, 2});
  Tensor b = Tensor::fromFloats(DType::BF16, {3}, {3, 4, 5});
  std::string fromMap = tempPath("from-map.safetensors");
  writeSafetensors(fromMap, std::map<std::string, Tensor>{{"a", a}, {"b", b}},
                   {{"format", "pt"}});
  std::string fromViews = tempPath("from-views.safetensors");
  writeSafetensors(fromViews, {{"b", &b}, {"a", &a}}, {{"format", "pt"}});
  EXPECT_EQ(readBytes(fromViews), readBytes(fromMap));
  try {
    writeSafetensors(fromViews, {{"a", &a}, {"b", &b}, {"a", &b}});
    ADD_FAILURE() << "wrote a name twice";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot write '" + fromViews + "': tensor 'a' is given twice");
  }
}

ProgramDesc twoParameterProgram() {
  ProgramDesc program;
  program.params = {{"w", fb::DType::bf16, {4, 3}, fb::InitKind::normal, 0.5},
                    {"ids", fb::DType::i64, {5}, fb::InitKind::ones, 0.0}};
  return program;
}

Session twoParameterSession(uint64_t seed) {
  return Session(Program::fromBytes(buildArtifact(twoParameterProgram())),
                 {"cpu", seed});
}

std::string loadError(Session &session, const std::string &path,
                      bool allowExtra = false) {
  try {
    session.loadParameters(path, allowExtra);
  } catch (const Error &error) {
    return error.what();
  }
  return "(loaded)";
}

TEST(SessionParameters, SaveThenLoadGivesIdenticalBytes) {
  Session source = twoParameterSession(11);
  std::string path = tempPath("params.safetensors");
  source.saveParameters(path);

  Session target = twoParameterSession(99);
  ASSERT_NE(target.parameter("w"), source.parameter("w"));
  target.loadParameters(path);
  EXPECT_EQ(target.parameter("w"), source.parameter("w"));
  EXPECT_EQ(target.parameter("ids"), source.parameter("ids"));

  std::string again = tempPath("again.safetensors");
  target.saveParameters(again);
  EXPECT_EQ(readBytes(again), readBytes(path));
}

TEST(SessionParameters, MissingParameterIsNamed) {
  std::string path = tempPath("partial.safetensors");
  writeSafetensors(path, {{"w", Tensor(DType::BF16, {4, 3})}});
  Session session = twoParameterSession(1);
  EXPECT_EQ(loadError(session, path),
            "'" + path + "': missing parameter 'ids' (expected i64[5])");
}

/// The first NaN or infinity of a loaded weight is named, in each
/// floating-point dtype (the largest finite values pass), and the
/// parameters keep their values.
TEST(SessionParameters, NonFiniteWeightsAreNamed) {
  struct Case {
    DType dtype;
    std::vector<uint16_t> bits; // 16-bit dtypes
    std::vector<float> values;  // f32
    const char *found;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Case> cases = {
      {DType::BF16,
       {0x3f80, 0x7f7f, 0xff80, 0x7fc0},
       {},
       "an infinity at element 2 (index [1, 0])"},
      {DType::BF16,
       {0x3f80, 0xff7f, 0x0001, 0xffc1},
       {},
       "NaN at element 3 (index [1, 1])"},
      {DType::F16,
       {0x7bff, 0x7c01, 0, 0},
       {},
       "NaN at element 1 (index [0, 1])"},
      {DType::F16,
       {0xfbff, 0, 0xfc00, 0},
       {},
       "an infinity at element 2 (index [1, 0])"},
      {DType::F32,
       {},
       {3.4e38f, -inf, nan, 0},
       "an infinity at element 1 (index [0, 1])"},
      {DType::F32,
       {},
       {0, 0, -3.4e38f, nan},
       "NaN at element 3 (index [1, 1])"},
  };
  ProgramDesc program;
  for (const Case &c : cases) {
    fb::DType dtype = c.dtype == DType::BF16  ? fb::DType::bf16
                      : c.dtype == DType::F16 ? fb::DType::f16
                                              : fb::DType::f32;
    program.params = {{"w", dtype, {2, 2}, fb::InitKind::normal, 1.0}};
    Session session(Program::fromBytes(buildArtifact(program)), {"cpu", 1});
    Tensor before = session.parameter("w");
    Tensor bad(c.dtype, {2, 2});
    if (c.dtype == DType::F32)
      std::memcpy(bad.data(), c.values.data(), 16);
    else
      std::memcpy(bad.data(), c.bits.data(), 8);
    std::string path = tempPath("nonfinite.safetensors");
    writeSafetensors(path, {{"w", bad}});
    EXPECT_EQ(loadError(session, path),
              "'" + path + "': parameter 'w' holds " + c.found +
                  "; a run from it would be meaningless (turn the check off "
                  "with --no-check-finite / SessionOptions::checkFinite)");
    EXPECT_EQ(session.parameter("w"), before);
  }
  // The largest finite values load.
  program.params = {{"w", fb::DType::bf16, {2}, fb::InitKind::normal, 1.0}};
  Session session(Program::fromBytes(buildArtifact(program)), {"cpu", 1});
  Tensor largest(DType::BF16, {2});
  uint16_t bits[] = {0x7f7f, 0xff7f};
  std::memcpy(largest.data(), bits, sizeof(bits));
  std::string path = tempPath("largest.safetensors");
  writeSafetensors(path, {{"w", largest}});
  EXPECT_EQ(loadError(session, path), "(loaded)");
}

TEST(SessionParameters, ShapeAndDTypeMismatchNameBoth) {
  std::string path = tempPath("mismatch.safetensors");
  writeSafetensors(path, {{"w", Tensor(DType::BF16, {3, 4})},
                          {"ids", Tensor(DType::I64, {5})}});
  Session session = twoParameterSession(1);
  EXPECT_EQ(loadError(session, path),
            "'" + path + "': parameter 'w' has shape [3,4], expected [4,3]");
  writeSafetensors(path, {{"w", Tensor(DType::BF16, {4, 3})},
                          {"ids", Tensor(DType::I32, {5})}});
  EXPECT_EQ(loadError(session, path),
            "'" + path + "': parameter 'ids' has dtype i32, expected i64");
}

TEST(SessionParameters, WeightsOfAnotherFloatDTypeAreConverted) {
  std::string path = tempPath("f32-into-bf16.safetensors");
  std::vector<float> values = testValues(12, 9);
  writeSafetensors(path, {{"w", Tensor::fromFloats(DType::F32, {4, 3}, values)},
                          {"ids", Tensor(DType::I64, {5})}});
  Session session = twoParameterSession(1);
  EXPECT_EQ(loadError(session, path), "(loaded)");
  EXPECT_EQ(session.parameter("w"),
            Tensor::fromFloats(DType::BF16, {4, 3}, values));
}

TEST(SessionParameters, ExtraTensorsNeedAllowExtra) {
  std::string path = tempPath("extra.safetensors");
  Tensor w = Tensor::fromFloats(DType::BF16, {4, 3}, testValues(12, 5));
  writeSafetensors(path, {{"w", w},
                          {"ids", Tensor(DType::I64, {5})},
                          {"optimizer.step", Tensor(DType::I64, {})}});
  Session session = twoParameterSession(1);
  Tensor before = session.parameter("w");
  EXPECT_EQ(loadError(session, path),
            "'" + path +
                "': tensor 'optimizer.step' is not a parameter of the program "
                "(pass allowExtra to ignore it)");
  EXPECT_EQ(session.parameter("w"), before) << "a failed load changes nothing";
  EXPECT_EQ(loadError(session, path, /*allowExtra=*/true), "(loaded)");
  EXPECT_EQ(session.parameter("w"), w);
}

/// Two experts [2, 2, 3] that model checkpoints hold as e.0.w and e.1.w.
Session stackedExpertsSession(uint64_t seed) {
  ProgramDesc program;
  ParamDesc experts{"e.w", fb::DType::f32, {2, 2, 3}, fb::InitKind::normal,
                    0.5};
  experts.parts = {"e.0.w", "e.1.w"};
  program.params = {experts};
  return Session(Program::fromBytes(buildArtifact(program)), {"cpu", seed});
}

TEST(SessionParameters, StackedPartsLoadAndSaveOnePerSlice) {
  std::string path = tempPath("experts.safetensors");
  std::vector<float> first = testValues(6, 1), second = testValues(6, 2);
  // The second part in bf16 is converted, as whole weights are.
  Tensor secondBf16 = Tensor::fromFloats(DType::BF16, {2, 3}, second);
  writeSafetensors(path,
                   {{"e.0.w", Tensor::fromFloats(DType::F32, {2, 3}, first)},
                    {"e.1.w", secondBf16}});
  Session session = stackedExpertsSession(1);
  EXPECT_EQ(loadError(session, path), "(loaded)");
  std::vector<float> stacked = first;
  for (float value : secondBf16.toFloats())
    stacked.push_back(value);
  EXPECT_EQ(session.parameter("e.w"),
            Tensor::fromFloats(DType::F32, {2, 2, 3}, stacked));

  // Saved as its parts again; a training-state file holds it whole.
  std::string saved = tempPath("experts-saved.safetensors");
  session.saveParameters(saved);
  std::map<std::string, Tensor> tensors = readSafetensors(saved);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("e.0.w"),
            Tensor::fromFloats(DType::F32, {2, 3}, first));
  EXPECT_EQ(tensors.at("e.1.w"), Tensor::fromFloats(DType::F32, {2, 3},
                                                    secondBf16.toFloats()));
  std::string state = tempPath("experts-state.safetensors");
  session.saveState(state, {});
  EXPECT_EQ(readSafetensors(state).at("e.w"), session.parameter("e.w"));
  Session other = stackedExpertsSession(2);
  other.loadState(state);
  EXPECT_EQ(other.parameter("e.w"), session.parameter("e.w"));
}

TEST(SessionParameters, MissingOrMisshapenPartIsNamed) {
  std::string path = tempPath("experts-partial.safetensors");
  writeSafetensors(path, {{"e.0.w", Tensor(DType::F32, {2, 3})}});
  Session session = stackedExpertsSession(1);
  EXPECT_EQ(loadError(session, path),
            "'" + path +
                "': missing parameter 'e.w' (expected f32[2,2,3]) or its part "
                "1 'e.1.w' (expected f32[2,3])");
  writeSafetensors(path, {{"e.0.w", Tensor(DType::F32, {2, 3})},
                          {"e.1.w", Tensor(DType::F32, {3, 2})}});
  EXPECT_EQ(loadError(session, path),
            "'" + path +
                "': tensor 'e.1.w' (part 1 of parameter 'e.w') has shape "
                "[3,2], expected [2,3]");
}

TEST(SessionParameters, TruncatedFileIsAnError) {
  Session session = twoParameterSession(3);
  std::string path = tempPath("params.safetensors");
  session.saveParameters(path);
  std::vector<uint8_t> bytes = readBytes(path);
  bytes.resize(bytes.size() - 3);
  writeBytes(path, bytes);
  EXPECT_THAT(loadError(session, path),
              HasSubstr("are out of range for a data section"));
}

} // namespace
} // namespace megrt::test

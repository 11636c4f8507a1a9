#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/epoch.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace {

using zc::test::contains;
using zc::test::error_message;

namespace fs = std::filesystem;

// A file name unique to the running test.
std::string temp_path(const std::string& suffix = "") {
  const fs::path dir = fs::path(ZC_TEST_TMPDIR) / "safetensors";
  fs::create_directories(dir);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (dir /
          (std::string(info->test_suite_name()) + "." + info->name() + suffix + ".safetensors"))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file written by hand: the 8-byte little-endian header length, the header, data.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string float_bytes(const std::vector<float>& values) {
  std::string s(values.size() * sizeof(float), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string bytes_of(const zc::Tensor& t) {
  zc::Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * zc::dtype_size(c.dtype());
  return n == 0 ? std::string() : std::string(static_cast<const char*>(c.raw_data()), n);
}

TEST(Safetensors, RoundTripsEveryDType) {
  std::map<std::string, zc::Tensor> tensors;
  tensors["f32"] = zc::from_vector({1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f}, {2, 3});
  tensors["f64"] = zc::from_values<double>({1.0 / 3.0, -1e300}, {2});
  tensors["f16"] = zc::from_values<zc::Half>({zc::Half(0.5f), zc::Half(-65504.0f)}, {1, 2});
  tensors["bf16"] = zc::from_values<zc::BFloat16>({zc::BFloat16(3.0f), zc::BFloat16(-1e20f)}, {2});
  tensors["i64"] = zc::from_values<int64_t>({int64_t{1} << 40, -3, 0}, {3, 1});
  tensors["i32"] = zc::from_values<int32_t>({-2147483647, 7}, {2});
  tensors["bool"] = zc::from_values<bool>({true, false, true}, {3});
  tensors["scalar"] = zc::scalar_tensor(4.0);
  tensors["empty"] = zc::zeros({0, 3});
  // Views are written as their logical contents.
  tensors["transposed"] = zc::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).t();

  const std::string path = temp_path();
  zc::write_safetensors(tensors, path);
  auto loaded = zc::read_safetensors(path);
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(loaded.count(name)) << name;
    const zc::Tensor& l = loaded.at(name);
    EXPECT_EQ(l.dtype(), t.dtype()) << name;
    EXPECT_EQ(l.shape(), t.shape()) << name;
    EXPECT_TRUE(l.is_contiguous()) << name;
    EXPECT_EQ(bytes_of(l), bytes_of(t)) << name;
  }
  EXPECT_TRUE(
      zc::allclose(loaded.at("transposed"), zc::from_vector({1, 4, 2, 5, 3, 6}, {3, 2}), 0, 0));
}

TEST(Safetensors, WritesSortedNamesAndAlignedHeader) {
  const std::string path = temp_path();
  zc::write_safetensors(
      {{"zeta", zc::from_vector({1, 2}, {2})}, {"alpha", zc::from_vector({3, 4, 5}, {3})}}, path);
  const std::string bytes = read_bytes(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_len % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + header_len + 5 * sizeof(float));
  const std::string header = bytes.substr(8, header_len);
  EXPECT_LT(header.find("\"alpha\""), header.find("\"zeta\"")) << header;
  EXPECT_TRUE(contains(header, "\"dtype\":\"F32\"")) << header;
  EXPECT_TRUE(contains(header, "\"data_offsets\":[0,12]")) << header;
  // alpha's bytes first, then zeta's.
  EXPECT_EQ(bytes.substr(8 + header_len), float_bytes({3, 4, 5, 1, 2}));
}

TEST(Safetensors, ReadsHandWrittenFileWithMetadataAndEscapes) {
  const std::string path = temp_path();
  const std::string header =
      "{\"__metadata__\": {\"format\": \"pt\"},\n"
      " \"w\\u00e9ight\\n\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]},\n"
      " \"b\": {\"shape\": [], \"dtype\": \"F32\", \"data_offsets\": [0, 4]}}   ";
  write_bytes(path, raw_file(header, float_bytes({9, 0, 1, 2})));
  auto loaded = zc::read_safetensors(path);
  ASSERT_EQ(loaded.size(), 2u);
  ASSERT_TRUE(loaded.count("w\xc3\xa9ight\n"));
  EXPECT_TRUE(zc::allclose(loaded.at("w\xc3\xa9ight\n"), zc::from_vector({1, 2}, {2}), 0, 0));
  EXPECT_EQ(loaded.at("b").dim(), 0);
  EXPECT_EQ(loaded.at("b").item<float>(), 9.0f);
}

TEST(Safetensors, LoadsModuleByName) {
  zc::manual_seed(1);
  auto source = zc::models::seed_model(2, 4);
  const std::string path = temp_path();
  zc::nn::save_safetensors(*source, path);
  EXPECT_EQ(zc::read_safetensors(path).size(), source->named_parameters().size());

  zc::manual_seed(2);
  auto target = zc::models::seed_model(2, 4);
  zc::Tensor handle = target->linear->weight;
  ASSERT_FALSE(zc::allclose(handle, source->linear->weight));
  const uint64_t epoch = zc::nn::module_epoch();
  zc::nn::load_safetensors(*target, path, /*strict=*/true);
  EXPECT_NE(zc::nn::module_epoch(), epoch);
  const auto src = source->named_parameters(), dst = target->named_parameters();
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_TRUE(zc::allclose(src[i].second, dst[i].second, 0, 0)) << src[i].first;
  }
  // The member handle taken before loading sees the loaded values.
  EXPECT_TRUE(zc::allclose(handle, source->linear->weight, 0, 0));
  zc::Tensor x = zc::randn({3, 4});
  EXPECT_TRUE(zc::allclose((*target)(x), (*source)(x), 0, 0));
}

TEST(Safetensors, LoadIgnoresExtraNamesUnlessStrict) {
  const std::string path = temp_path();
  zc::nn::Linear lin(2, 3);
  auto tensors = std::map<std::string, zc::Tensor>{
      {"weight", zc::ones({3, 2})}, {"bias", zc::zeros({3})}, {"extra.thing", zc::ones({1})}};
  zc::write_safetensors(tensors, path);
  const std::string msg = error_message([&] { zc::nn::load_safetensors(lin, path, true); });
  EXPECT_TRUE(contains(msg, "\"extra.thing\"")) << msg;
  EXPECT_FALSE(zc::allclose(lin.weight, zc::ones({3, 2})));  // a failed load changes nothing
  zc::nn::load_safetensors(lin, path);
  EXPECT_TRUE(zc::allclose(lin.weight, zc::ones({3, 2}), 0, 0));
}

TEST(Safetensors, LoadMissingNameNamesIt) {
  const std::string path = temp_path();
  zc::write_safetensors({{"weight", zc::ones({3, 2})}}, path);
  zc::nn::Linear lin(2, 3);
  const std::string msg = error_message([&] { zc::nn::load_safetensors(lin, path); });
  EXPECT_TRUE(contains(msg, "no tensor named \"bias\"")) << msg;
  EXPECT_TRUE(contains(msg, "zc::nn::Linear")) << msg;
}

TEST(Safetensors, LoadShapeMismatchGivesBothShapes) {
  const std::string path = temp_path();
  zc::write_safetensors({{"weight", zc::ones({2, 3})}, {"bias", zc::zeros({3})}}, path);
  zc::nn::Linear lin(2, 3);
  const std::string msg = error_message([&] { zc::nn::load_safetensors(lin, path); });
  EXPECT_TRUE(contains(msg, "\"weight\"")) << msg;
  EXPECT_TRUE(contains(msg, "[2,3]")) << msg;
  EXPECT_TRUE(contains(msg, "[3,2]")) << msg;
}

TEST(Safetensors, LoadDTypeMismatchGivesBothDTypes) {
  const std::string path = temp_path();
  zc::write_safetensors(
      {{"weight", zc::ones({3, 2}, zc::DType::f64)}, {"bias", zc::zeros({3}, zc::DType::f64)}},
      path);
  zc::nn::Linear lin(2, 3);
  const std::string msg = error_message([&] { zc::nn::load_safetensors(lin, path); });
  EXPECT_TRUE(contains(msg, "f64")) << msg;
  EXPECT_TRUE(contains(msg, "f32")) << msg;
  lin.to(zc::DType::f64);
  zc::nn::load_safetensors(lin, path);
  EXPECT_TRUE(zc::allclose(lin.weight, zc::ones({3, 2}, zc::DType::f64), 0, 0));
}

TEST(Safetensors, TruncatedFileNamesTheTensor) {
  const std::string path = temp_path();
  zc::write_safetensors({{"a", zc::ones({4})}, {"big", zc::ones({100})}}, path);
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 10));
  const std::string msg = error_message([&] { zc::read_safetensors(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "\"big\"")) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;

  write_bytes(path, bytes.substr(0, 5));
  EXPECT_TRUE(contains(error_message([&] { zc::read_safetensors(path); }), "too short"));
  write_bytes(path, bytes.substr(0, 20));
  EXPECT_TRUE(contains(error_message([&] { zc::read_safetensors(path); }), "header length"));
}

TEST(Safetensors, BadJsonGivesTheOffset) {
  const std::string path = temp_path();
  struct Case {
    std::string header, expected;
  };
  const std::vector<Case> cases = {
      {"{\"a\": {\"dtype\": \"F32\",}}", "header byte 22"},
      {"{\"a\": 1.}", "expected a digit after the decimal point"},
      {"{\"a\": tru}", "expected a value"},
      {"{\"a\": \"x}", "unterminated string"},
      {"{\"a\": {}, \"a\": {}}", "duplicate key \"a\""},
      {"{\"a\": \"\\q\"}", "invalid escape"},
      {"{\"a\": 99999999999999999999}", "64 bits"},
      {"{} {}", "after the top-level value"},
      {"[]", "must be an object"},
      {std::string(100, '[') + std::string(100, ']'), "nesting"},
      {"", "end of input"},
  };
  for (const auto& c : cases) {
    write_bytes(path, raw_file(c.header, ""));
    const std::string msg = error_message([&] { zc::read_safetensors(path); });
    EXPECT_TRUE(contains(msg, c.expected)) << c.header << " -> " << msg;
    EXPECT_TRUE(contains(msg, path)) << msg;
  }
}

TEST(Safetensors, BadEntriesNameTheTensorAndTheCause) {
  const std::string path = temp_path();
  const std::string data = float_bytes({1, 2, 3, 4});
  struct Case {
    std::string header, expected;
  };
  const std::vector<Case> cases = {
      {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 20]}})", "extend past the end"},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", "needs 12"},
      {R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})",
       "\"U8\" is not supported"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "non-negative"},
      // JSON numbers that are not integers are values, but not sizes.
      {R"({"w": {"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]}})", "non-negative"},
      {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16.0]}})", "begin <= end"},
      {R"({"w": {"dtype": "F32", "shape": null, "data_offsets": [0, 16]}})", "must be array"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "begin <= end"},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", "missing \"data_offsets\""},
      {R"({"w": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})", "must be string"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", "unknown field"},
      {R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})",
       "needs more than the whole data section"},
      {R"({"v": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       "overlap those of \"v\""},
      {R"({"w": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}})", "byte value"},
  };
  for (const auto& c : cases) {
    write_bytes(path, raw_file(c.header, data));
    const std::string msg = error_message([&] { zc::read_safetensors(path); });
    EXPECT_TRUE(contains(msg, "\"w\"")) << c.header << " -> " << msg;
    EXPECT_TRUE(contains(msg, c.expected)) << c.header << " -> " << msg;
  }
}

// Every single-byte corruption and every truncation of a valid file either reads or raises
// zc::Error; nothing else escapes and nothing crashes.
TEST(Safetensors, CorruptedFilesRaiseOnlyZcError) {
  const std::string path = temp_path();
  zc::write_safetensors({{"a", zc::from_values<int32_t>({1, 2, 3}, {3})},
                         {"mask", zc::from_values<bool>({true, false}, {2})},
                         {"w", zc::randn({2, 2}, zc::DType::f16)}},
                        path);
  const std::string good = read_bytes(path);
  auto attempt = [&](const std::string& bytes, const std::string& what) {
    write_bytes(path, bytes);
    try {
      zc::read_safetensors(path);
    } catch (const zc::Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
  };
  for (size_t len = 0; len < good.size(); ++len) {
    attempt(good.substr(0, len), "truncated to " + std::to_string(len));
  }
  const char replacements[] = {'0', '9', '-', '"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\xff'};
  for (size_t i = 0; i < good.size(); ++i) {
    for (char c : replacements) {
      std::string bytes = good;
      bytes[i] = c;
      attempt(bytes, "byte " + std::to_string(i) + " set to " + std::to_string(c));
    }
  }
}

TEST(Safetensors, HeaderLengthBeyondFileSize) {
  const std::string path = temp_path();
  std::string bytes = raw_file("{}", "");
  bytes[5] = 1;  // 2^40 + 2 bytes of header
  write_bytes(path, bytes);
  const std::string msg = error_message([&] { zc::read_safetensors(path); });
  EXPECT_TRUE(contains(msg, "header length 1099511627778 exceeds")) << msg;
}

TEST(Safetensors, MissingFile) {
  const std::string path = temp_path("-does-not-exist");
  fs::remove(path);
  const std::string msg = error_message([&] { zc::read_safetensors(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "cannot open")) << msg;
  // A directory is no safetensors file either.
  EXPECT_THROW(zc::read_safetensors(fs::path(path).parent_path().string()), zc::Error);
}

}  // namespace

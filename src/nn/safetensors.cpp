#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nn/epoch.h"
#include "nn/json.h"
#include "tensor/assign.h"
#include "zc/nn.h"
#include "zc/serialize.h"

namespace zc {

// The format is little-endian and tensors are copied byte for byte.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

// The reference implementation refuses larger headers too; a corrupt length must not make us
// allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"},      {DType::bf16, "BF16"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::boolean, "BOOL"}, {DType::i8, "I8"},
};
static_assert(std::size(kDTypeNames) == kNumDTypes, "every DType needs a safetensors name");

const char* safetensors_name(DType dtype) {
  for (const auto& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

std::string supported_dtypes() {
  std::string s;
  for (const auto& d : kDTypeNames) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

[[noreturn]] void file_error(const std::string& path, const std::string& what) {
  throw Error("safetensors '" + path + "': " + what);
}

[[noreturn]] void tensor_error(const std::string& path, const std::string& name,
                               const std::string& what) {
  file_error(path, "tensor " + json::quote(name) + ": " + what);
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

const json::Value& field(const std::string& path, const std::string& name, const json::Value& info,
                         const char* key, json::Value::Kind kind) {
  const json::Value* v = info.find(key);
  if (!v) tensor_error(path, name, std::string("missing \"") + key + "\"");
  if (v->kind != kind) {
    tensor_error(path, name,
                 std::string("\"") + key + "\" must be " + std::string(json::kind_name(kind)) +
                     ", found " + std::string(json::kind_name(v->kind)));
  }
  return *v;
}

Entry parse_entry(const std::string& path, const std::string& name, const json::Value& info,
                  uint64_t data_bytes) {
  if (info.kind != json::Value::Kind::object) tensor_error(path, name, "entry must be an object");
  for (const auto& [key, value] : info.object) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      tensor_error(path, name, "unknown field " + json::quote(key));
    }
  }
  Entry e{name, DType::f32, {}, 0, 0};
  const std::string& dtype = field(path, name, info, "dtype", json::Value::Kind::string).string;
  const DTypeName* found = nullptr;
  for (const auto& d : kDTypeNames) {
    if (dtype == d.name) found = &d;
  }
  if (!found) {
    tensor_error(path, name,
                 "dtype " + json::quote(dtype) +
                     " is not supported (supported: " + supported_dtypes() + ")");
  }
  e.dtype = found->dtype;

  // The product saturates past the data section's size, so a hostile shape cannot overflow it.
  uint64_t nbytes = dtype_size(e.dtype);
  bool too_big = false;
  for (const auto& dim : field(path, name, info, "shape", json::Value::Kind::array).array) {
    if (dim.kind != json::Value::Kind::integer || dim.integer < 0) {
      tensor_error(path, name, "shape must be a list of non-negative integers");
    }
    e.shape.push_back(dim.integer);
    const auto d = static_cast<uint64_t>(dim.integer);
    if (d != 0 && nbytes > data_bytes / d) {
      too_big = true;
      nbytes = data_bytes + 1;
    } else {
      nbytes *= d;
    }
  }
  if (nbytes == 0) too_big = false;
  const auto& offsets = field(path, name, info, "data_offsets", json::Value::Kind::array).array;
  if (offsets.size() != 2 || offsets[0].kind != json::Value::Kind::integer ||
      offsets[1].kind != json::Value::Kind::integer || offsets[0].integer < 0 ||
      offsets[1].integer < offsets[0].integer) {
    tensor_error(path, name, "data_offsets must be [begin, end] with 0 <= begin <= end");
  }
  e.begin = static_cast<uint64_t>(offsets[0].integer);
  e.end = static_cast<uint64_t>(offsets[1].integer);
  const std::string range =
      "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.end > data_bytes) {
    tensor_error(path, name,
                 range + " extend past the end of the data section (" + std::to_string(data_bytes) +
                     " bytes): the file is truncated or corrupt");
  }
  if (too_big || e.end - e.begin != nbytes) {
    tensor_error(path, name,
                 range + " hold " + std::to_string(e.end - e.begin) + " bytes, but " + dtype + " " +
                     shape_str(e.shape) + " needs " +
                     (too_big ? "more than the whole data section" : std::to_string(nbytes)));
  }
  return e;
}

void check_metadata(const std::string& path, const json::Value& metadata) {
  if (metadata.kind != json::Value::Kind::object)
    file_error(path, "__metadata__ must be an object");
  for (const auto& [key, value] : metadata.object) {
    if (value.kind != json::Value::Kind::string) {
      file_error(path, "__metadata__ value of " + json::quote(key) + " must be a string");
    }
  }
}

// A C++ bool with a byte other than 0 or 1 is undefined behaviour, so such files are refused.
void check_bools(const std::string& path, const std::string& name, const Tensor& t) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (bytes[i] > 1) {
      tensor_error(path, name,
                   "BOOL element " + std::to_string(i) + " has byte value " +
                       std::to_string(bytes[i]) + " (expected 0 or 1)");
    }
  }
}

}  // namespace

std::map<std::string, Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) file_error(path, std::string("cannot open for reading: ") + std::strerror(errno));
  const std::streamoff end = in.tellg();
  if (end < 0) file_error(path, "cannot determine the file size (is it a regular file?)");
  const auto file_bytes = static_cast<uint64_t>(end);
  if (file_bytes < 8) {
    file_error(path, "file is " + std::to_string(file_bytes) +
                         " bytes, too short for the 8-byte header length: truncated?");
  }
  in.seekg(0);
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | len_bytes[i];
  if (header_bytes > file_bytes - 8) {
    file_error(path, "header length " + std::to_string(header_bytes) + " exceeds the " +
                         std::to_string(file_bytes - 8) +
                         " bytes that follow it: the file is truncated or not safetensors");
  }
  if (header_bytes > kMaxHeaderBytes) {
    file_error(path, "header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                         std::to_string(kMaxHeaderBytes) + " bytes");
  }
  std::string header(header_bytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) {
    file_error(path, "could not read the " + std::to_string(header_bytes) + "-byte header");
  }
  json::Value root;
  try {
    root = json::parse(header);
  } catch (const json::ParseError& e) {
    file_error(path, "malformed JSON header at header byte " + std::to_string(e.offset) +
                         " (file offset " + std::to_string(e.offset + 8) + "): " + e.reason);
  }
  if (root.kind != json::Value::Kind::object) {
    file_error(path,
               "JSON header must be an object, found " + std::string(json::kind_name(root.kind)));
  }

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, info] : root.object) {
    if (name == "__metadata__") {
      check_metadata(path, info);
      continue;
    }
    entries.push_back(parse_entry(path, name, info, data_bytes));
  }

  // Empty tensors occupy no bytes and so cannot overlap anything.
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& prev = *by_offset[i - 1];
    const Entry& cur = *by_offset[i];
    if (cur.begin < prev.end) {
      tensor_error(path, cur.name,
                   "data_offsets [" + std::to_string(cur.begin) + ", " + std::to_string(cur.end) +
                       "] overlap those of " + json::quote(prev.name) + " [" +
                       std::to_string(prev.begin) + ", " + std::to_string(prev.end) + "]");
    }
  }

  std::map<std::string, Tensor> out;
  for (const auto& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const uint64_t n = e.end - e.begin;
    if (n > 0) {
      in.seekg(static_cast<std::streamoff>(data_start + e.begin));
      if (!in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(n))) {
        tensor_error(path, e.name,
                     "could not read its " + std::to_string(n) + " bytes: the file is truncated");
      }
    }
    if (e.dtype == DType::boolean) check_bools(path, e.name, t);
    out.emplace(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path) {
  std::vector<Tensor> contiguous;
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") {
      throw Error("write_safetensors '" + path + "': invalid tensor name " + json::quote(name));
    }
    if (!tensor.defined()) {
      throw Error("write_safetensors '" + path + "': tensor " + json::quote(name) +
                  " is undefined");
    }
    const Tensor t = (tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu())).contiguous();
    const uint64_t n = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    std::string shape = "[";
    for (size_t i = 0; i < t.shape().size(); ++i) {
      if (i > 0) shape += ',';
      shape += std::to_string(t.shape()[i]);
    }
    shape += "]";
    if (!contiguous.empty()) header += ',';
    header += json::quote(name) + ":{\"dtype\":\"" + safetensors_name(t.dtype()) +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + n) + "]}";
    offset += n;
    contiguous.push_back(t);
  }
  header += "}";
  // Spaces pad the header to 8 bytes, as the reference writer does, so the data stays aligned.
  header.append((8 - header.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw Error("write_safetensors '" + path +
                "': cannot open for writing: " + std::strerror(errno));
  }
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len_bytes), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : contiguous) {
    const uint64_t n = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    if (n > 0) out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(n));
  }
  out.close();
  if (!out) throw Error("write_safetensors '" + path + "': write failed: " + std::strerror(errno));
}

namespace nn {

namespace {

std::vector<std::pair<std::string, Tensor>> state_of(const Module& module) {
  auto tensors = module.named_parameters();
  auto buffers = module.named_buffers();
  tensors.insert(tensors.end(), buffers.begin(), buffers.end());
  return tensors;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 10; ++i) {
    if (i > 0) s += ", ";
    s += json::quote(names[i]);
  }
  if (names.size() > 10) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

}  // namespace

void load_safetensors(Module& module, const std::string& path, bool strict) {
  const std::string who = "load_safetensors(" + module.type_name() + ", '" + path + "')";
  std::map<std::string, Tensor> loaded = read_safetensors(path);
  const auto state = state_of(module);

  // Everything is checked before anything is assigned, so a failed load changes nothing.
  std::vector<std::string> missing;
  for (const auto& [name, target] : state) {
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      missing.push_back(name);
      continue;
    }
    Tensor& value = it->second;
    if (value.shape() != target.shape()) {
      throw Error(who + ": tensor " + json::quote(name) + " has shape " + shape_str(value.shape()) +
                  " in the file, but the module expects " + shape_str(target.shape()));
    }
    if (value.dtype() != target.dtype()) {
      throw Error(who + ": tensor " + json::quote(name) + " is " +
                  std::string(dtype_name(value.dtype())) + " in the file, but the module's is " +
                  std::string(dtype_name(target.dtype())) +
                  " (convert the module with to(DType) first)");
    }
    if (value.device() != target.device()) value = value.to(target.device());
  }
  if (!missing.empty()) {
    std::vector<std::string> present;
    for (const auto& entry : loaded) present.push_back(entry.first);
    throw Error(
        who + ": the file has no tensor named " + name_list(missing) +
        (present.empty() ? " (it holds no tensors)" : " (it holds " + name_list(present) + ")"));
  }
  if (strict) {
    std::vector<std::string> unexpected;
    for (const auto& [name, value] : loaded) {
      const bool known = std::any_of(state.begin(), state.end(),
                                     [&](const auto& entry) { return entry.first == name; });
      if (!known) unexpected.push_back(name);
    }
    if (!unexpected.empty()) {
      throw Error(who + ": the module has no parameter or buffer named " + name_list(unexpected) +
                  " (pass strict=false to ignore them)");
    }
  }

  for (const auto& [name, target] : state) {
    // Member handles share this TensorImpl, so replacing its contents updates them too.
    replace_contents(target, loaded.at(name));
  }
  bump_module_epoch();
}

void save_safetensors(const Module& module, const std::string& path) {
  std::map<std::string, Tensor> tensors;
  for (auto& [name, tensor] : state_of(module)) tensors.emplace(name, std::move(tensor));
  write_safetensors(tensors, path);
}

}  // namespace nn

}  // namespace zc

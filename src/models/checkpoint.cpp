#include "models/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/epoch.h"
#include "nn/json.h"
#include "tensor/assign.h"
#include "zc/serialize.h"

namespace zc::models {

namespace fs = std::filesystem;

namespace {

bool stored_as_float(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::f64;
}

std::vector<std::string> shards_of_index(const std::string& path, const std::string& who) {
  const std::string text = read_text_file(path, who);
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const json::ParseError& e) {
    throw Error(who + ": " + path + ": malformed JSON at byte " + std::to_string(e.offset) + ": " +
                e.reason);
  }
  const json::Value* map = root.find("weight_map");
  if (!map || map->kind != json::Value::Kind::object) {
    throw Error(who + ": " + path +
                ": expected an object with a \"weight_map\" object (tensor name -> shard file)");
  }
  std::set<std::string> files;
  for (const auto& [name, file] : map->object) {
    if (file.kind != json::Value::Kind::string) {
      throw Error(who + ": " + path + ": weight_map entry " + json::quote(name) +
                  " must be a file name, found " + std::string(json::kind_name(file.kind)));
    }
    // A shard is a file beside the index: a path elsewhere is not what save_pretrained writes.
    const fs::path p(file.string);
    if (file.string.empty() || p.has_parent_path() || file.string == "." || file.string == "..") {
      throw Error(who + ": " + path + ": weight_map entry " + json::quote(name) + " names " +
                  json::quote(file.string) + ", not a file name beside the index");
    }
    files.insert(file.string);
  }
  if (files.empty()) throw Error(who + ": " + path + ": its weight_map names no tensors");
  return {files.begin(), files.end()};
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& who) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(who + ": cannot read " + path + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(who + ": error reading " + path);
  return text;
}

CheckpointFiles checkpoint_files(const std::string& dir) {
  const std::string who = "zc::models::from_pretrained('" + dir + "')";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::is_regular_file(single)) return {{single.string()}, single.string()};
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::is_regular_file(index)) {
    std::string hint;
    for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"}) {
      if (fs::exists(fs::path(dir) / pickle)) {
        hint = std::string(" (it holds ") + pickle +
               ", PyTorch's pickle format, which zc does not read: save the model with "
               "save_pretrained(..., safe_serialization=True))";
      }
    }
    throw Error(who + ": no weights: expected model.safetensors or model.safetensors.index.json" +
                hint);
  }
  CheckpointFiles out;
  for (const std::string& shard : shards_of_index(index.string(), who)) {
    const fs::path p = fs::path(dir) / shard;
    if (!fs::is_regular_file(p)) {
      throw Error(who + ": shard " + json::quote(shard) + " named by " + index.string() +
                  " is missing");
    }
    out.files.push_back(p.string());
  }
  out.description = "the " + std::to_string(out.files.size()) + " shard(s) of " + index.string();
  return out;
}

void load_checkpoint(const CheckpointFiles& checkpoint, const std::vector<WeightSource>& sources,
                     const std::function<bool(const std::string&)>& ignored, DType dtype,
                     const std::string& who) {
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < sources.size(); ++i) {
    for (const std::string& name : sources[i].names) by_name.emplace(name, i);
  }
  std::vector<std::string> found_as(sources.size());
  for (const std::string& file : checkpoint.files) {
    // One file at a time, so that a sharded checkpoint never holds more than one shard twice.
    for (auto& [name, value] : read_safetensors(file)) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) {
        if (ignored(name)) continue;
        throw Error(who + ": " + file + " holds tensor " + json::quote(name) +
                    ", which the model has no place for: the checkpoint was made for another "
                    "architecture or configuration than its config.json describes");
      }
      const WeightSource& source = sources[it->second];
      std::string& seen = found_as[it->second];
      if (!seen.empty()) {
        throw Error(who + ": tensor " + json::quote(source.names[0]) + " is stored twice (as " +
                    json::quote(seen) + " and as " + json::quote(name) + " in " + file + ")");
      }
      if (!stored_as_float(value.dtype())) {
        throw Error(who + ": tensor " + json::quote(name) + " in " + file + " is stored as " +
                    std::string(dtype_name(value.dtype())) +
                    "; weights must be F32, BF16, F16 or F64 (quantized checkpoints are not "
                    "supported)");
      }
      Shape expected = source.target.shape();
      if (source.transposed) std::reverse(expected.begin(), expected.end());
      if (value.shape() != expected) {
        throw Error(who + ": tensor " + json::quote(name) + " in " + file + " has shape " +
                    shape_str(value.shape()) + ", expected " + shape_str(expected) +
                    " from config.json");
      }
      Tensor v = source.transposed ? value.t() : value;
      v = v.to(dtype).contiguous();
      // The target's handle now shows the stored values in `dtype`; a module's members share
      // it, so they see them too.
      replace_contents(source.target, v);
      seen = name;
    }
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (found_as[i].empty()) missing.push_back(sources[i].names[0]);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i)
      list += (i ? ", " : "") + json::quote(missing[i]);
    if (missing.size() > 5) list += ", ... (" + std::to_string(missing.size()) + " in all)";
    throw Error(who + (missing.size() == 1 ? ": tensor " : ": tensors ") + list +
                (missing.size() == 1 ? " is" : " are") + " missing from the checkpoint (" +
                checkpoint.description + ")");
  }
  nn::bump_module_epoch();
}

}  // namespace zc::models

// .npy files (NumPy's format 1.0) for the tensors `zc run` reads and writes and the tests
// exchange with ONNX Runtime: f32, f64, i64, i32 and bool, little-endian, C order.
#pragma once

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "zc/error.h"
#include "zc/tensor.h"

namespace zc_cli {

using zc::DType;
using zc::Error;
using zc::Shape;
using zc::Tensor;

inline const char* npy_descr(zc::DType t) {
  switch (t) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i64:
      return "<i8";
    case DType::i32:
      return "<i4";
    case DType::boolean:
      return "|b1";
    case DType::i8:
      return "|i1";
    default:
      return "";
  }
}

inline void write_npy(const std::string& path, const zc::Tensor& t) {
  std::string shape;
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  std::string header = std::string("{'descr': '") + npy_descr(t.dtype()) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  Tensor c = t.contiguous();
  out.write(static_cast<const char*>(c.raw_data()),
            static_cast<std::streamsize>(c.numel() * dtype_size(c.dtype())));
}

// Raises zc::Error naming the file for anything but a C-order array of those dtypes.
inline zc::Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& why) {
    return Error("'" + path + "' is not an .npy array " + "zc reads: " + why);
  };
  if (all.size() < 10 || all.compare(0, 6, "\x93NUMPY") != 0 || all[6] != 1) {
    throw bad("no NumPy 1.0 header");
  }
  const size_t len =
      static_cast<uint8_t>(all[8]) | static_cast<size_t>(static_cast<uint8_t>(all[9])) << 8;
  if (all.size() < 10 + len) throw bad("truncated header");
  const std::string header = all.substr(10, len);
  DType dt = DType::f32;
  bool known = false;
  for (DType t : {DType::f32, DType::f64, DType::i64, DType::i32, DType::boolean}) {
    if (header.find(std::string("'descr': '") + npy_descr(t) + "'") != std::string::npos) {
      dt = t;
      known = true;
    }
  }
  if (!known) throw bad("dtype not one of float32, float64, int64, int32, bool");
  if (header.find("'fortran_order': False") == std::string::npos) throw bad("Fortran order");
  const size_t at = header.find("'shape'");
  const size_t open = at == std::string::npos ? at : header.find('(', at);
  const size_t close = open == std::string::npos ? open : header.find(')', open);
  if (close == std::string::npos) throw bad("no shape");
  Shape shape;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  for (std::string tok; std::getline(dims, tok, ',');) {
    if (tok.find_first_not_of(' ') == std::string::npos) continue;
    try {
      shape.push_back(std::stoll(tok));
    } catch (const std::exception&) {
      throw bad("shape '" + header.substr(open, close - open + 1) + "'");
    }
    if (shape.back() < 0) throw bad("a negative dim");
  }
  Tensor t = Tensor::empty(shape, dt);
  const size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
  if (all.size() != 10 + len + bytes)
    throw bad("its data is not " + std::to_string(bytes) + " bytes");
  std::memcpy(t.raw_data(), all.data() + 10 + len, bytes);
  return t;
}

}  // namespace zc_cli

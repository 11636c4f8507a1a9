#include "onnx/external_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>

#include "zc/error.h"

namespace zc::onnx_file {

bool is_external(const ::onnx::TensorProto& t) {
  return t.data_location() == ::onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

struct ExternalData::Mapping {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (data) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

ExternalData::ExternalData(std::string dir) : dir_(std::move(dir)) {}
ExternalData::~ExternalData() = default;

namespace {

// A decimal offset or length as the ONNX spec writes them (a string of digits).
uint64_t parse_count(const std::string& v, const char* key, const std::string& what) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(what + ": external data " + key + " '" + v + "' is not a count of bytes");
  }
  return std::stoull(v);
}

// A location zc follows: relative, inside the model's folder (the ONNX checker's own rule).
void check_location(const std::string& loc, const std::string& what) {
  bool ok = !loc.empty() && loc[0] != '/' && loc.find('\\') == std::string::npos &&
            loc.find('\0') == std::string::npos;
  for (size_t start = 0; ok && start <= loc.size();) {
    const size_t end = std::min(loc.find('/', start), loc.size());
    if (loc.compare(start, end - start, "..") == 0) ok = false;
    start = end + 1;
  }
  if (!ok) {
    throw Error(what + ": external data location '" + loc +
                "' is not a relative path inside the model's folder");
  }
}

}  // namespace

const ExternalData::Mapping& ExternalData::map(const std::string& location,
                                               const std::string& what) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(location);
  if (it != files_.end()) return *it->second;
  const std::string path = dir_ + "/" + location;
  auto m = std::make_unique<Mapping>();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    throw Error(what + ": its data is in '" + path +
                "' (external data), which cannot be read; keep the file the exporter wrote "
                "beside the model");
  }
  m->size = static_cast<uint64_t>(st.st_size);
  if (m->size > 0) {
    void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error(what + ": cannot map '" + path + "'");
    }
    m->data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return *files_.emplace(location, std::move(m)).first->second;
}

std::span<const uint8_t> ExternalData::bytes_of(const ::onnx::TensorProto& t, uint64_t nbytes,
                                                const std::string& what) const {
  std::string location;
  uint64_t offset = 0, length = nbytes;
  bool has_length = false;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset") {
      offset = parse_count(e.value(), "offset", what);
    } else if (e.key() == "length") {
      length = parse_count(e.value(), "length", what);
      has_length = true;
    }
    // "checksum" (an optional SHA-1) is not checked: the length and bounds are.
  }
  check_location(location, what);
  if (t.has_raw_data()) throw Error(what + ": both raw_data and external data are given");
  const Mapping& m = map(location, what);
  if (!has_length && offset <= m.size) length = m.size - offset;
  if (length != nbytes) {
    throw Error(what + ": external data in '" + location + "' holds " + std::to_string(length) +
                " bytes, its dims and type need " + std::to_string(nbytes));
  }
  if (offset > m.size || length > m.size - offset) {
    throw Error(what + ": external data bytes " + std::to_string(offset) + " to " +
                std::to_string(offset + length) + " lie outside '" + location + "' (" +
                std::to_string(m.size) + " bytes)");
  }
  return {m.data + offset, static_cast<size_t>(length)};
}

}  // namespace zc::onnx_file

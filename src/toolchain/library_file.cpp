#include "toolchain/library_file.h"

#include <glob.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/env.h"

namespace zc::toolchain {

namespace {

void add_home(std::vector<std::string>& dirs, const std::string& home) {
  if (home.empty()) return;
  dirs.push_back(home + "/lib64");
  dirs.push_back(home + "/lib");
}

void add_path_list(std::vector<std::string>& dirs, const std::string& list) {
  for (size_t pos = 0; pos <= list.size();) {
    size_t end = list.find(':', pos);
    if (end == std::string::npos) end = list.size();
    if (end > pos) dirs.push_back(list.substr(pos, end - pos));
    pos = end + 1;
  }
}

// The directories of one ld.so.conf file: a line names a directory or includes other files
// (a glob, relative to the including file's directory); '#' starts a comment. The depth bound
// stops a file that includes itself.
void add_loader_conf(std::vector<std::string>& dirs, const std::string& file, int depth) {
  if (depth > 4) return;
  std::ifstream in(file);
  const std::string here = file.substr(0, file.rfind('/') + 1);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    if (word == "include") {
      std::string pattern;
      if (!(words >> pattern)) continue;
      if (pattern[0] != '/') pattern = here + pattern;
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) add_loader_conf(dirs, g.gl_pathv[i], depth + 1);
      }
      ::globfree(&g);
      continue;
    }
    do {
      if (word[0] == '/') dirs.push_back(word);
    } while (words >> word);
  }
}

}  // namespace

std::string LibraryFile::identity(std::string_view kind) const {
  return std::string(kind) + "{path=" + path + ";file=" + real_path +
         ";size=" + std::to_string(size) + ";mtime_ns=" + std::to_string(mtime_ns) + "}";
}

std::vector<std::string> cuda_library_dirs() {
  std::vector<std::string> dirs;
  if (const auto home = env::get(env::Var::cuda_home)) add_home(dirs, *home);
#ifdef ZC_CUDA_HOME
  add_home(dirs, ZC_CUDA_HOME);
#endif
  add_home(dirs, "/usr/local/cuda");
  if (const auto ld = env::get(env::Var::ld_library_path)) add_path_list(dirs, *ld);
  for (const char* d : {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64"}) {
    dirs.push_back(d);
  }
  add_loader_conf(dirs, "/etc/ld.so.conf", 0);
  return dirs;
}

std::optional<LibraryFile> describe_library_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  LibraryFile info;
  info.path = path;
  char real[PATH_MAX];
  info.real_path = ::realpath(path.c_str(), real) ? real : path;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return info;
}

std::optional<LibraryFile> find_library_file(const std::vector<std::string>& dirs,
                                             const std::vector<std::string>& names) {
  for (const std::string& dir : dirs) {
    for (const std::string& name : names) {
      if (auto info = describe_library_file(dir + "/" + name)) return info;
    }
  }
  return std::nullopt;
}

}  // namespace zc::toolchain

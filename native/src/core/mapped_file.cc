#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace fulcrum {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat (" + std::strerror(e) + ")");
  }
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular, non-empty file");
  }
  size_ = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error(path + ": mmap of " + std::to_string(size_) + " bytes failed (" + std::strerror(e) + ")");
  // Weights are streamed front to back once per token: read ahead, and keep them resident.
  ::madvise(p, size_, MADV_WILLNEED);
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

const uint8_t* MappedFile::range(uint64_t offset, uint64_t bytes, const std::string& what) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw std::runtime_error(path_ + ": " + what + " spans bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset + bytes) + ") but the file has " + std::to_string(size_) + " bytes");
  }
  return data_ + offset;
}

uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

}  // namespace fulcrum

// A read-only private memory map of a model file. Tensor offsets come from the TypeScript GGUF
// reader; `range` re-checks each one against the real file size here, so a bad table can never
// make a kernel read outside the mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fulcrum {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws std::runtime_error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Pointer to [offset, offset+bytes); throws naming `what` when the range is outside the file.
  const uint8_t* range(uint64_t offset, uint64_t bytes, const std::string& what) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// /proc/meminfo MemAvailable in bytes, or 0 when unknown.
uint64_t mem_available_bytes();

}  // namespace fulcrum

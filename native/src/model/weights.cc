// Weights: finding and checking the GGUF tensors the architecture needs, row views of fused
// matrices, the CPU's huge-page copy with repacked layouts, and the bytes a device copies.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <set>
#include <stdexcept>
#include <tuple>

#include "kernels/float_fns.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace fulcrum {

namespace {

// ggml's names for every type id a GGUF file may hold, for error messages about types that have
// no entry in the traits table.
std::string type_name(GgmlType t) {
  const TypeTraits& tt = type_traits(t);
  if (tt.name) return tt.name;
  static const char* const names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
                                      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
                                      "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  const int i = static_cast<int>(t);
  if (i >= 0 && i < static_cast<int>(sizeof(names) / sizeof(names[0]))) return names[i];
  return "type " + std::to_string(i);
}

}  // namespace

const Weight& Model::find(const std::string& name, int64_t cols, int64_t rows, bool required, bool matmul, int64_t matrices) {
  auto it = table_.find(name);
  if (it == table_.end()) {
    if (required) throw std::runtime_error(file_->path() + ": tensor '" + name + "' is missing");
    static const Weight none{};
    return none;
  }
  const TensorEntry& t = it->second;
  const TypeTraits& tt = type_traits(t.type);
  if (!tt.name || !tt.supported || !tt.dequantize_row || (matmul && !tt.vec_dot))
    throw std::runtime_error(file_->path() + ": tensor '" + name + "' has type " + type_name(t.type) +
                             ", which Fulcrum's CPU kernels do not support");
  const int64_t d0 = t.dims.empty() ? 1 : t.dims[0];
  const int64_t d1 = t.dims.size() > 1 ? t.dims[1] : 1;
  const int64_t d2 = t.dims.size() > 2 ? t.dims[2] : 1;
  for (size_t i = 3; i < t.dims.size(); ++i)
    if (t.dims[i] != 1) throw std::runtime_error(file_->path() + ": tensor '" + name + "' has more than 3 dimensions");
  if (d0 != cols || d1 != rows || d2 != matrices)
    throw std::runtime_error(file_->path() + ": tensor '" + name + "' has shape [" + std::to_string(d0) + ", " + std::to_string(d1) +
                             (t.dims.size() > 2 || matrices > 1 ? ", " + std::to_string(d2) : "") + "], expected [" + std::to_string(cols) + ", " +
                             std::to_string(rows) + (matrices > 1 ? ", " + std::to_string(matrices) : "") + "]");
  rows *= matrices;
  if (cols % tt.block_size != 0)
    throw std::runtime_error(file_->path() + ": tensor '" + name + "' row of " + std::to_string(cols) + " elements is not a multiple of the " +
                             tt.name + " block size " + std::to_string(tt.block_size));
  if (matmul && !type_traits(tt.vec_dot_type).quantize_row)
    throw std::runtime_error(file_->path() + ": tensor '" + name + "' of type " + tt.name + " needs activations in " +
                             type_name(tt.vec_dot_type) + ", which is not available");
  auto w = std::make_unique<Weight>();
  w->name = name;
  w->type = t.type;
  w->cols = cols;
  w->rows = rows;
  w->row_bytes = static_cast<size_t>(cols / tt.block_size) * tt.type_size;
  w->data = file_->range(t.offset, static_cast<uint64_t>(w->row_bytes) * static_cast<uint64_t>(rows), "tensor '" + name + "'");
  w->cpu_data = w->data;
  if (matrices > 1) w->matrix_rows = rows / matrices;
  weights_.push_back(std::move(w));
  return *weights_.back();
}

Weight Model::rows_of(const Weight& whole, int64_t row0, int64_t rows, const std::string& name) {
  if (row0 < 0 || rows < 1 || row0 + rows > whole.rows)
    throw std::runtime_error(file_->path() + ": tensor '" + whole.name + "': rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) +
                             ") are outside its " + std::to_string(whole.rows));
  Weight w = whole;
  w.name = name;
  w.rows = rows;
  w.data = whole.data + static_cast<size_t>(row0) * whole.row_bytes;
  w.cpu_data = w.data;
  return w;
}

MoeWeights Model::moe_weights(const Layer& L, Loc loc) const {
  // The device's copy of a resident weight: the CPU's (possibly repacked) bytes on the loopback,
  // the GGUF bytes on a device with its own kernels (device_weight_bytes).
  auto bytes = [&](const Weight& w) -> const uint8_t* { return loc == Loc::Dev ? resident_.at(&w) : w.cpu_data; };
  const bool cpu_layout = loc == Loc::Host || !dk_;
  auto matrices = [&](const Weight& w) {
    ExpertMatrices m;
    m.type = w.type;
    m.data = bytes(w);
    m.rows = w.matrix_rows;
    m.cols = w.cols;
    m.row_bytes = w.row_bytes;
    m.packed = cpu_layout && w.cpu_layout != WeightLayout::Gguf ? quant::packed_format(w.type) : nullptr;
    return m;
  };
  MoeWeights mw;
  mw.router_type = L.router.type;
  mw.router = bytes(L.router);
  mw.router_packed = cpu_layout && L.router.cpu_layout != WeightLayout::Gguf ? quant::packed_format(L.router.type) : nullptr;
  mw.gate = matrices(L.gate_exps);
  mw.up = matrices(L.up_exps);
  mw.down = matrices(L.down_exps);
  return mw;
}

// Decode streams every matmul weight once per token, so it runs at the speed the memory system
// delivers those bytes. Page-cache pages of the mapped file sit behind 4 KiB page-table entries
// (a TLB miss every 4 KiB); a copy in anonymous memory advised for transparent huge pages is
// walked with 2 MiB entries. Off with FULCRUM_NO_WEIGHT_COPY=1 (keeps the file pages only).
void Model::relocate_matmul_weights() {
  if (const char* e = std::getenv("FULCRUM_NO_WEIGHT_COPY"); e && e[0] == '1') return;
  std::vector<Weight*> ws;
  for (Layer& L : layers_)
    for (Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.gate_exps, &L.up_exps, &L.down_exps})
      if (w->data) ws.push_back(w);  // (no gate in an ungated FFN, no dense FFN in an MoE one)
  ws.push_back(&output_);
  constexpr size_t kAlign = 64;
  size_t total = 0;
  for (Weight* w : ws) total += (w->row_bytes * static_cast<size_t>(w->rows) + kAlign - 1) / kAlign * kAlign;
  HugeRegion arena(total, true);
  if (!arena.ok()) return;  // not fatal: the weights stay in the file mapping
  weight_arena_ = std::move(arena);
  uint8_t* base = weight_arena_.base();
  // pread copies from the page cache in the kernel, without faulting the file mapping in 4 KiB
  // at a time; the mapped bytes are the fallback when the file cannot be read that way.
  const uint8_t* file_base = file_->range(0, 0, "file start");
  const int fd = ::open(file_->path().c_str(), O_RDONLY | O_CLOEXEC);
  // Formats with a packed layout on this CPU (quant/packed/repack.h) are rewritten group by group in
  // the copy, through a one-group scratch buffer: the CPU reads the packed copy, while `data`
  // keeps pointing at the file's GGUF bytes for devices (their pages stay out of memory unless a
  // device reads them).
  std::vector<uint8_t> group;
  size_t off = 0;
  for (Weight* w : ws) {
    const size_t n = w->row_bytes * static_cast<size_t>(w->rows);
    const off_t src = static_cast<off_t>(w->data - file_base);
    size_t got = 0;
    while (fd >= 0 && got < n) {
      const ssize_t r = ::pread(fd, base + off + got, n - got, src + static_cast<off_t>(got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (got < n) std::memcpy(base + off + got, w->data + got, n - got);
    w->cpu_data = base + off;
    const bool matrices_on_groups = w->matrix_rows == 0 || !quant::packs(w->type, w->rows, w->cols) ||
                                    w->matrix_rows % quant::packed_format(w->type)->group_rows == 0;
    if (quant::packs(w->type, w->rows, w->cols) && matrices_on_groups) {
      const quant::PackedFormat& pf = *quant::packed_format(w->type);
      group.resize(w->row_bytes * static_cast<size_t>(pf.group_rows));
      quant::repack_rows(pf, base + off, w->rows, w->cols, group.data());
      w->cpu_layout = pf.layout;
    } else {
      w->data = w->cpu_data;
    }
    off += (n + kAlign - 1) / kAlign * kAlign;
  }
  if (fd >= 0) ::close(fd);
}

std::vector<float> Model::vector_f32(const Weight& w, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  type_traits(w.type).dequantize_row(w.data, out.data(), n);
  return out;
}

int64_t Model::device_rows(const Weight& w, const OpPlacement& o) const {
  if (o.loc != Loc::Dev) return 0;
  int64_t r = o.dev_fraction >= 1.0 ? w.rows : std::llround(static_cast<double>(w.rows) * o.dev_fraction);
  r = std::max<int64_t>(0, std::min(w.rows, r));
  // The CPU reads a repacked weight by whole row groups (quant/packed/repack.h): the split lands on a
  // group edge (the nearest; rows is a whole number of groups).
  if (w.cpu_layout != WeightLayout::Gguf) {
    const int64_t g = quant::packed_format(w.type)->group_rows;
    r = (r + g / 2) / g * g;
  }
  return r;
}

const uint8_t* Model::device_weight_bytes(const Weight& w) const { return dk_ ? w.data : w.cpu_data; }

}  // namespace fulcrum

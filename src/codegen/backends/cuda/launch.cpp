#include "codegen/backends/cuda/launch.h"

#include <algorithm>

#include "codegen/backends/cuda/packs.h"
#include "codegen/c_like_emitter.h"
#include "ops/eager.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"
#include "util/check.h"

namespace zc::codegen::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Threads per row of a reduction over `n` elements in a kernel of `rows` rows: a power of two
// from one warp to 256, so short rows do not leave most of a block idle; up to 1024 when there
// are fewer rows than kFewRows. Each thread walks its row a load at a time, one after another:
// a decode step's RMSNorm (one row of 2048) took 9-10 us at 256 threads, eight dependent
// loads each, where a pointwise kernel over as many elements took 5; and its greedy argmax
// (one row of 32,000) 52 us, with one multiprocessor of 132 at work.
int row_block(int64_t n, int64_t rows) {
  const int most = rows < kFewRows ? 1024 : 256;
  int b = 32;
  while (b < most && b < n) b *= 2;
  return b;
}

// The values kernel k reads from memory (c_like_emitter.h), each once. A library matmul's
// product is read from memory by its epilogue.
std::vector<ir::ValueId> memory_reads(const Schedule& s, int32_t k) {
  const Kernel& K = s.kernels[k];
  const ir::ValueId product =
      K.kind == KernelKind::matmul ? s.graph.nodes[K.anchor].outputs[0] : ir::ValueId{-1};
  std::vector<ir::ValueId> out;
  for (int32_t idx : K.nodes) {
    if (idx == K.anchor) continue;
    for (ir::ValueId u : s.graph.nodes[idx].inputs) {
      if (!in_kernel_register(s, k, u, product) && !read_as_literal(s, u) &&
          std::find(out.begin(), out.end(), u) == out.end()) {
        out.push_back(u);
      }
    }
  }
  return out;
}

// Value u's stride along the last dim of the iteration space it is broadcast to: 0 when it is
// broadcast along it.
int64_t last_dim_stride(const Schedule& s, ir::ValueId u) {
  const Shape& shape = s.graph.meta(u).shape;
  if (shape.empty() || shape.back() == 1) return 0;
  return s.at(u).view.strides.back();
}

// Whether row_reduce kernel K takes the column form: the last dim of its space is kept (so
// consecutive rows are consecutive elements), there are kColumnMinRows rows or more,
// every reduction is a sum, and nothing is stored per element (the column form computes only
// row values).
bool column_form(const Schedule& s, const Kernel& K, int64_t rows) {
  if (K.space.empty() || rows < kColumnMinRows) return false;
  const int64_t last = static_cast<int64_t>(K.space.size()) - 1;
  if (std::find(K.reduce_dims.begin(), K.reduce_dims.end(), last) != K.reduce_dims.end()) {
    return false;
  }
  for (int32_t n : K.nodes) {
    const ir::Node& node = s.graph.nodes[n];
    if (ops::is_primitive_reduction(node.op) && node.op != ops::OpId::sum) return false;
  }
  for (ir::ValueId v : K.stores) {
    if (!s.at(v).row_level) return false;
  }
  return true;
}

}  // namespace

AttentionTiling attention_tiling(DType compute, int64_t head_dim, int64_t value_dim) {
  const int64_t widest = std::max(head_dim, value_dim);
  if (compute == DType::f32 && head_dim % 4 == 0 && value_dim % 4 == 0 && widest <= 128) {
    // 64 keys a tile keep the block's shared memory under 48 KiB up to 64 dims; 32 above.
    return {.tiled = true, .rows = kAttentionTileRows, .keys = widest <= 64 ? 64 : 32};
  }
  const int tpr = widest > 64 ? 8 : 4;
  return {.tiled = false, .threads_per_row = tpr, .rows = kAttentionThreads / tpr};
}

int64_t attention_key_rows(int64_t tq, bool any_size) {
  if (any_size || tq > kAttentionKeyRows) return kAttentionKeyRowsMany;
  return std::max<int64_t>(tq, 1);
}

int64_t attention_key_warps(DType compute, int64_t head_dim, int64_t value_dim, int64_t rows) {
  // The rows' queries, then each warp's maximum, sum and accumulators.
  auto bytes = [&](int64_t w) {
    return (rows * head_dim + w * rows * (2 + value_dim)) *
           static_cast<int64_t>(dtype_size(compute));
  };
  int64_t w = kAttentionKeyWarps;
  while (w > 1 && bytes(w) > kAttentionKeysSharedBytes) w /= 2;
  return bytes(w) <= kAttentionKeysSharedBytes ? w : 0;
}

int64_t attention_key_vector(const Schedule& s, const Kernel& k) {
  const ir::ValueId K = s.graph.nodes[k.anchor].inputs[1];
  const DType stored = s.graph.meta(s.base_of(K)).dtype;
  if (s.varies(k) || stored != s.graph.meta(K).dtype) return 1;
  const int64_t v = static_cast<int64_t>(16 / dtype_size(stored));
  const Shape& shape = s.graph.meta(K).shape;
  const ValueView& view = s.at(K).view;
  if (shape.back() % v != 0 || view.offset % v != 0 || view.strides.back() != 1) return 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i] != 1 && view.strides[i] % v != 0) return 1;
  }
  return v;
}

AttentionGradTiling attention_grad_tiling(DType compute, int64_t head_dim, int64_t value_dim,
                                          int64_t side_rows, int64_t batch, bool any_size) {
  const int64_t widest = std::max(head_dim, value_dim);
  if (compute == DType::f32 && head_dim % 4 == 0 && value_dim % 4 == 0 && widest <= 128) {
    if (widest > 64) return {.tiled = true, .rows = 16, .cols = 16};
    const bool many = !any_size && batch * ceil_div(side_rows, 32) >= kAttentionGradManyBlocks;
    return {.tiled = true, .rows = many ? 32 : 16, .cols = 32};
  }
  const int tpr = widest > 64 ? 8 : 4;
  return {.tiled = false, .rows = kAttentionThreads / tpr, .threads_per_row = tpr};
}

std::vector<ir::ValueId> vector_loads(const Schedule& s, int32_t k) {
  std::vector<ir::ValueId> out;
  for (ir::ValueId u : memory_reads(s, k)) {
    if (last_dim_stride(s, u) == 1) out.push_back(u);
  }
  return out;
}

int vector_width(const Schedule& s, int32_t k) {
  const Kernel& K = s.kernels[k];
  if (K.space.empty() || K.space.back() <= 1) return 1;
  // Code for many sizes whose last dim varies: a width that divides one size may not divide
  // the next.
  for (ir::ValueId v : K.stores) {
    if (s.varies(v) && (s.varying[v] >> (s.graph.meta(v).shape.size() - 1) & 1)) return 1;
  }
  std::vector<ir::ValueId> dense;
  for (ir::ValueId u : memory_reads(s, k)) {
    const int64_t st = last_dim_stride(s, u);
    if (st != 0 && st != 1) return 1;
    if (st == 1) dense.push_back(u);
  }
  for (ir::ValueId v : K.stores) {
    if (s.graph.meta(v).shape != K.space || s.at(v).view.offset != 0) return 1;
    dense.push_back(v);
  }
  size_t widest = 0;
  for (ir::ValueId u : dense)
    widest = std::max(widest, dtype_size(s.graph.meta(s.base_of(u)).dtype));
  if (widest == 0 || widest > 8) return 1;
  const int width = static_cast<int>(16 / widest);
  if (K.space.back() % width != 0) return 1;
  // Each step's first element must sit at a multiple of the width in every dense operand.
  for (ir::ValueId u : dense) {
    const ValueView& v = s.at(u).view;
    if (v.offset % width != 0) return 1;
    const Shape& shape = s.graph.meta(u).shape;
    for (size_t d = 0; d + 1 < shape.size(); ++d) {
      if (shape[d] != 1 && v.strides[d] % width != 0) return 1;
    }
  }
  return width;
}

int64_t rows_vector(const Schedule& s, const Kernel& k) {
  const ir::Node& n = s.graph.nodes[k.anchor];
  const ops::MatmulShapes d =
      ops::matmul_shapes(s.graph.meta(n.inputs[0]).shape, s.graph.meta(n.inputs[1]).shape);
  size_t narrow = 16;
  for (ir::ValueId u : n.inputs)
    narrow = std::min(narrow, dtype_size(s.graph.meta(s.base_of(u)).dtype));
  const int64_t v = static_cast<int64_t>(16 / narrow);
  if (d.K % v != 0) return 1;
  // Every dim but k (stride 1: A's last, B's second last) steps by whole chunks, and so does
  // the view's start.
  for (size_t o = 0; o < 2; ++o) {
    const ValueView& view = s.at(n.inputs[o]).view;
    const Shape& shape = s.graph.meta(n.inputs[o]).shape;
    const size_t kdim = shape.size() - 1 - o;
    if (view.offset % v != 0) return 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i != kdim && shape[i] != 1 && view.strides[i] % v != 0) return 1;
    }
  }
  return v;
}

int matmul_micro_tile(int64_t M, int64_t N) {
  return M >= 64 && N >= 64 ? 4 : 1;
}

std::vector<Launch> unpacked_launch_plan(const Schedule& s) {
  std::vector<Launch> plan;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    const Kernel& K = s.kernels[k];
    Launch l;
    l.kind = K.kind;
    l.symbol = "zc_k" + std::to_string(k) + "_" + kernel_kind_name(K.kind);
    l.buffers = kernel_reads(s, K);
    for (ir::ValueId v : K.stores) l.buffers.push_back(s.base_of(v));
    std::sort(l.buffers.begin(), l.buffers.end());
    l.buffers.erase(std::unique(l.buffers.begin(), l.buffers.end()), l.buffers.end());
    int64_t largest = shape_numel(K.space);
    for (ir::ValueId b : l.buffers) largest = std::max(largest, shape_numel(s.graph.meta(b).shape));
    switch (K.kind) {
      case KernelKind::pointwise:
        l.work = shape_numel(K.space);
        l.vector = vector_width(s, static_cast<int32_t>(k));
        break;
      case KernelKind::copy:
        l.work = shape_numel(s.graph.meta(K.copy_from).shape);
        break;
      case KernelKind::concat:
        for (ir::ValueId u : s.graph.nodes[K.anchor].inputs)
          l.work = std::max(l.work, shape_numel(s.graph.meta(u).shape));
        break;
      case KernelKind::gather: {
        const ir::Node& n = s.graph.nodes[K.anchor];
        l.work = shape_numel(s.graph.meta(n.outputs[0]).shape);
        l.error_flag = true;
        break;
      }
      case KernelKind::row_reduce: {
        // The rows are the kept dims' elements, counted directly: a row may be empty (a sum
        // over a dim of size 0 stores its identity), and its result is stored all the same.
        int64_t row = 1, rows = 1;
        for (size_t d = 0; d < K.space.size(); ++d) {
          const bool reduced = std::find(K.reduce_dims.begin(), K.reduce_dims.end(),
                                         static_cast<int64_t>(d)) != K.reduce_dims.end();
          (reduced ? row : rows) *= K.space[d];
        }
        l.work = rows;
        l.grid_x = l.work;
        // Code for many sizes keeps one block size for rows of every length.
        l.block_x = s.varies(K) ? 256 : row_block(row, rows);
        if (column_form(s, K, l.work)) {
          l.columns = true;
          l.block_x = kColumnRows;
          l.block_y = kColumnThreads;
          l.grid_x = ceil_div(l.work, int64_t{kColumnRows});
        }
        break;
      }
      case KernelKind::matmul: {
        const ir::Node& n = s.graph.nodes[K.anchor];
        if (K.rows) {
          const ops::MatmulShapes d =
              ops::matmul_shapes(s.graph.meta(n.inputs[0]).shape, s.graph.meta(n.inputs[1]).shape);
          l.block_x = 32 * kRowsWarps;
          l.grid_x = ceil_div(d.N, int64_t{kRowsWarps});
          l.vector = static_cast<int>(rows_vector(s, K));
          l.grid_z = shape_numel(d.batch);
          l.work = shape_numel(K.space);
          largest = std::max(largest, d.M * d.K);
          break;
        }
        if ((l.library = library_matmul(s, K))) {
          // cuBLASLt computes the product; a grid-stride kernel runs the epilogue over it.
          l.has_kernel = K.nodes.size() > 1;
          l.work = shape_numel(K.space);
          l.vector = vector_width(s, static_cast<int32_t>(k));
          break;
        }
        ops::MatmulShapes d =
            ops::matmul_shapes(s.graph.meta(n.inputs[0]).shape, s.graph.meta(n.inputs[1]).shape);
        // One tile for every size of code for many sizes (the tile is in the code).
        l.micro = s.varies(K) ? 1 : matmul_micro_tile(d.M, d.N);
        l.block_x = l.block_y = kMatmulThreads;
        l.grid_x = ceil_div(d.N, int64_t{kMatmulThreads} * l.micro);
        l.grid_y = ceil_div(d.M, int64_t{kMatmulThreads} * l.micro);
        l.grid_z = shape_numel(d.batch);
        l.work = shape_numel(K.space);
        largest = std::max(largest, d.M * d.K);
        break;
      }
      case KernelKind::attention: {
        // A block per `rows` rows of the output (query rows, or key rows for dk and dv) and
        // batch item.
        const ir::Node& n = s.graph.nodes[K.anchor];
        const Shape& out = s.graph.meta(n.outputs[0]).shape;
        const DType compute = ops::compute_dtype(s.graph.meta(n.outputs[0]).dtype);
        const int64_t d = s.graph.meta(n.inputs[0]).shape.back();
        const bool lse = n.op == ops::OpId::attention_lse;
        const size_t row_dim = out.size() - (lse ? 1 : 2);
        int rows = 0;
        if (n.op == ops::OpId::attention_grad) {
          rows = attention_grad_tiling(
                     compute, d, s.graph.meta(n.inputs[2]).shape.back(), out[row_dim],
                     shape_numel(Shape(out.begin(), out.begin() + row_dim)), s.varies(K))
                     .rows;
        } else if (n.inputs.size() == 4) {  // a mask: the keys form
          rows = static_cast<int>(attention_key_rows(out[row_dim], s.varies(K)));
        } else {
          rows = attention_tiling(compute, d, lse ? d : out.back()).rows;
        }
        l.block_x = kAttentionThreads;
        if (n.inputs.size() == 4) {
          l.block_x = static_cast<int>(
              32 * std::max<int64_t>(1, attention_key_warps(compute, d, out.back(), rows)));
          l.vector = static_cast<int>(attention_key_vector(s, K));
        }
        l.grid_x = ceil_div(out[row_dim], rows);
        l.grid_y = shape_numel(Shape(out.begin(), out.begin() + row_dim));
        l.work = shape_numel(out);
        for (ir::ValueId u : n.inputs)
          largest = std::max(largest, shape_numel(s.graph.meta(u).shape));
        break;
      }
      case KernelKind::extern_op:
        // The only op the backend keeps without generating it: conv2d, through cuDNN.
        l.conv = library_conv(s, K);
        ZC_CHECK(l.conv, "the CUDA backend runs no extern "
                             << ops::op_def(s.graph.nodes[K.anchor].op).name << " (kernel " << k
                             << ")");
        l.has_kernel = false;
        l.work = shape_numel(K.space);
        break;
    }
    // Index arithmetic in 32 bits is several times cheaper on a GPU; half the range is kept
    // free so that a grid-stride step past the end cannot overflow.
    l.use_32bit_index = largest < (int64_t{1} << 30);
    plan.push_back(std::move(l));
  }
  return plan;
}

std::vector<Launch> launch_plan(const Schedule& s, const BufferPlan& buffers) {
  std::vector<Launch> plan = unpacked_launch_plan(s);
  pack_launches(s, buffers, plan);
  return plan;
}

}  // namespace zc::codegen::cuda

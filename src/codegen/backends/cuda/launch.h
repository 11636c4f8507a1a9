// The launch plan of a CUDA module: for each kernel of a schedule, its symbol, the buffers it
// takes as parameters (in order), its thread shape and how much work it covers. A function of
// the schedule and buffer plan alone, so that loading a cached cubin rebuilds the plan without
// emitting the source again, and the emitter and the loader cannot disagree about parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/backends/cuda/library_conv.h"
#include "codegen/backends/cuda/library_matmul.h"
#include "codegen/buffer_plan.h"

namespace zc::codegen::cuda {

struct Launch {
  KernelKind kind;
  std::string symbol;
  // Every buffer the kernel reads or writes, by base value, ascending: one pointer parameter
  // each, then (for gathers) the error flag.
  std::vector<ir::ValueId> buffers;
  bool error_flag = false;
  int block_x = 256, block_y = 1;  // threads per block
  // Blocks wanted: pointwise kinds cover `work` elements with a grid-stride loop (the loader
  // caps the grid by the device's size); a row reduction has one block per row (a stride
  // loop past the cap); a matmul tiles [grid_y rows of tiles, grid_x columns, grid_z batches].
  int64_t work = 0;
  int64_t grid_x = 1, grid_y = 1, grid_z = 1;
  bool use_32bit_index = true;  // every index of the kernel fits in 31 bits
  // A matmul run by cuBLASLt; its generated kernel, when it has one (`has_kernel`), is the
  // elementwise epilogue over the product in memory.
  std::optional<LibraryMatmul> library;
  // An extern kernel: a convolution run by cuDNN (no generated kernel).
  std::optional<LibraryConv> conv;
  bool has_kernel = true;
  // Pointwise kinds (and a library epilogue): elements each thread takes per step, read and
  // written with one load or store of up to 16 bytes per dense operand (vector_width()); 1
  // for element-by-element code.
  int vector = 1;
  // A generated matmul: elements per thread along each edge (matmul_micro_tile).
  int micro = 1;
  // A row reduction in column form (kColumnRows rows a block, see above).
  bool columns = false;
  // Launches packed into one kernel (packs.h). On a pack's first member: every member's
  // index, itself first, and the buffers and error flag of any of them (the pack kernel's
  // parameters, ascending). On a later member: the first member's index; it is not launched on
  // its own.
  struct Pack {
    std::vector<int32_t> members;
    std::vector<ir::ValueId> buffers;
    bool error_flag = false;
  };
  std::optional<Pack> pack;
  int32_t packed_into = -1;
};

// Row reductions whose rows are strided in memory (a bias gradient: a sum over every dim but
// the last) take kColumnRows consecutive rows per block along x, and split each row over
// kColumnThreads threads along y (launch: `columns`): a warp's load is 4 runs of 8 consecutive
// f32 elements, a 32-byte sector each, where one block per row would read 4 bytes of 32
// sectors. They need kColumnMinRows rows, enough blocks to fill a GPU of 132 multiprocessors
// twice: with fewer (a [8, 128, 768] bias gradient's 768), a block per row keeps more loads in
// flight and is faster (measured on an H100). Others take one block per row.
inline constexpr int kColumnRows = 8;
// A row reduction of fewer rows than this takes up to 1024 threads a row (launch.cpp:
// row_block), others up to 256.
inline constexpr int64_t kFewRows = 128;
inline constexpr int kColumnThreads = 32;
inline constexpr int64_t kColumnMinRows = 2048;

// The generated matmul kernel (matmul.cpp): blocks of kMatmulThreads x kMatmulThreads
// threads, each thread computing micro x micro elements, over slices of kMatmulTileK along k.
inline constexpr int kMatmulThreads = 16;
inline constexpr int kMatmulTileK = 16;
// A product streamed as rows (Kernel::rows, matmul.cpp): a warp per output column n, its lanes
// taking chunks of k of B's row n and the M rows of A, kRowsWarps warps a block (small blocks
// spread a narrow product's columns over more multiprocessors); at most kRowsMaxM rows of A
// (each lane keeps M sums in registers); rows longer than kRowsShortK at most kRowsLongMaxM
// (backend.cpp says why); kRowsUnroll chunks' loads in flight per lane.
inline constexpr int kRowsWarps = 4;
inline constexpr int kRowsMaxM = 8;
inline constexpr int kRowsLongMaxM = 2;
inline constexpr int kRowsShortK = 128;
inline constexpr int kRowsUnroll = 8;
// The elements of a rows product's chunk (Launch::vector): 16 bytes of its narrower operand,
// when k and both operands' views keep every chunk on a multiple of that many elements (the
// kernel still checks the pointers' alignment when it runs); 1 otherwise.
int64_t rows_vector(const Schedule& s, const Kernel& k);
// 4 (a 64x64 tile per block, 16 products per pair of shared loads) for products with at least
// 64 rows and 64 columns; 1 (16x16, one element per thread) for smaller ones, whose blocks
// would otherwise compute mostly padding.
int matmul_micro_tile(int64_t M, int64_t N);
// The fused attention kernel's blocks, kAttentionThreads threads each, in one of two forms:
//  - tiled (attention_tiled.cpp): f32 compute (f32, f16 and bf16 operands) with head dims
//    that are multiples of 4, up to 128. A block takes kAttentionTileRows query rows and walks
//    the keys in tiles of `keys` through shared memory; scores and the output are small
//    register tiles per thread, as in a matrix product.
//  - rows (attention.cpp), for the rest (f64, odd head dims, dims above 128):
//    `threads_per_row` threads share a query row (each holds every threads_per_row-th element
//    of its query and output, and a score is summed across them with shuffles), so a block
//    takes `rows` query rows. Head dims above 64 use more threads per row, keeping a thread's
//    registers bounded.
inline constexpr int kAttentionThreads = 128;
inline constexpr int kAttentionTileRows = 32;
struct AttentionTiling {
  bool tiled = false;
  int threads_per_row = 4;  // rows form only
  int rows = kAttentionThreads / 4;
  int keys = 0;  // tiled form: keys per shared-memory tile
};
AttentionTiling attention_tiling(DType compute, int64_t head_dim, int64_t value_dim);
// An attention with a mask (its fourth input, ops/attention.cpp) takes a third form, keys
// (attention_keys.cpp): a block takes all Tq query rows up to kAttentionKeyRows, its warps
// taking turns at 32 keys; made for few rows against many keys (a decode step's queries of a
// group against its cached keys). More rows (a prefill's), or code for many sizes, take
// kAttentionKeyRowsMany a block: the rows are unrolled, and NVRTC took 0.54 s for 8 rows
// against 0.29 s for 4, on the first token's path. Its shared memory (the rows' queries, each
// warp's state) must fit kAttentionKeysSharedBytes.
// Its block has up to kAttentionKeyWarps warps, fewer where their states would not fit
// (attention_key_warps); each lane reads its key's row in 16-byte chunks of attention_key_vector
// elements where the keys' view allows (dense rows on chunk boundaries, code for one size).
inline constexpr int64_t kAttentionKeyRows = 8;
inline constexpr int64_t kAttentionKeyRowsMany = 4;
inline constexpr int64_t kAttentionKeyWarps = 16;
inline constexpr int64_t kAttentionKeysSharedBytes = 48 * 1024;
int64_t attention_key_rows(int64_t tq, bool any_size);
// 0 when even one warp's state does not fit.
int64_t attention_key_warps(DType compute, int64_t head_dim, int64_t value_dim, int64_t rows);
int64_t attention_key_vector(const Schedule& s, const Kernel& k);
// attention_lse takes the forward's kernel without its value product (its value dim is its
// head dim here), attention_grad its own (below).

// attention_grad's kernels (attention_backward*.cpp), kAttentionThreads threads a block, in
// the same two forms as the forward:
//  - tiled (attention_backward_tiled.cpp): f32 compute (f32, f16 and bf16 operands) with
//    head and value dims that are multiples of 4 up to 128. A block owns `rows` rows of its side
//    (query rows for dq, key rows for dk and dv) and walks the other side in tiles of `cols`
//    rows through shared memory, everything it stages within the 48 KiB of static shared memory:
//    up to 64 dims, 32 x 32 when that makes at least kAttentionGradManyBlocks blocks, else
//    16 x 32 (a GPT's 8 x 12 heads of 128 tokens make 384 blocks of 32 rows: with 16 rows, twice
//    as many blocks, each with half the causal imbalance, keep a 132-multiprocessor GPU busier,
//    for 2 x 2 register tiles instead of 4 x 2); above 64 dims, 16 x 16. Code for many sizes
//    (`any_size`) takes 16 rows whatever the sizes.
//  - rows (attention_backward.cpp), for the rest: `threads_per_row` threads share a row
//    (each holds every threads_per_row-th element of its operands and gradients), so a block takes
//    `rows` rows; the other side's tiles hold as many rows as fit 32 KiB.
// `side_rows` is the length of the block's side (Tq for dq, Tk for dk and dv), `batch` the
// number of batch items.
inline constexpr int64_t kAttentionGradManyBlocks = 1024;
struct AttentionGradTiling {
  bool tiled = false;
  int rows = 32;
  int cols = 32;            // tiled form only
  int threads_per_row = 4;  // rows form only
};
AttentionGradTiling attention_grad_tiling(DType compute, int64_t head_dim, int64_t value_dim,
                                          int64_t side_rows, int64_t batch, bool any_size);

// Elements per vector step of pointwise kernel k (or a library matmul's epilogue), when its
// loads and stores allow one: every value read from memory is dense along the last dim of the
// iteration space (stride 1, with the element of every step's first lane a multiple of the
// width) or constant along it (stride 0, one scalar load per lane), every store is dense, and
// the last dim is a multiple of the width. The width makes the widest element's vector 16
// bytes. 1 when any of that fails. The pointers' run-time alignment is checked by the kernel
// itself, which keeps an element loop for misaligned inputs.
int vector_width(const Schedule& s, int32_t k);

// The values that vector steps of kernel k load as vectors (those dense along the last dim).
std::vector<ir::ValueId> vector_loads(const Schedule& s, int32_t k);

// Every kernel's launch, packs included (packs.h).
std::vector<Launch> launch_plan(const Schedule& s, const BufferPlan& plan);
// The same without packs: what the buffer plan's runs (packs.h: pack_runs) are decided from.
std::vector<Launch> unpacked_launch_plan(const Schedule& s);

}  // namespace zc::codegen::cuda

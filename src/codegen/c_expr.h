// Elementwise nodes as C source, for every C-like emitter (C++ on the CPU, CUDA C++): storage
// and compute types, conversions between them, and the code computing one node around its op's
// own C expression (ops/elementwise.h). This is the one place where the bool-as-int rule and the
// 16-bit round-to-storage rule meet generated code.
//
// Every C-like target's prelude defines, besides what ops/elementwise.h lists: zc_h2f, zc_f2h,
// zc_bf2f, zc_f2bf (16-bit floats are stored as uint16_t bits and computed in float).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace zc::codegen {

std::string storage_type(DType t);  // the C type in memory ("uint16_t" for f16 and bf16)
std::string compute_type(DType t);  // the C type in registers (f16 and bf16 compute in float)

// A stored element of dtype t as its compute type, and a compute-type value as t stores it.
std::string from_storage(DType t, const std::string& e);
std::string to_storage(DType t, const std::string& e);

// `v`, a value of dtype t, as a constant of t's compute type.
std::string literal(double v, DType t);

// The lines computing node n (an elementwise op of g) into a new register `reg` of its
// output's compute type, from its operands as loaded (each in the compute type of its own
// dtype).
std::vector<std::string> node_lines(const ir::Graph& g, const ir::Node& n,
                                    std::span<const std::string> operands, const std::string& reg);

// The line rounding register `reg` as storing it in dtype t would round it, or "" when t
// stores a compute value exactly. The eager kernels store every result, so generated code
// rounds every f16 and bf16 result it keeps in a register.
std::string round_to_storage(DType t, const std::string& reg);

}  // namespace zc::codegen

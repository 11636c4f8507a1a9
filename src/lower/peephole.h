// peephole(): local rewrites of one node given its input's producer.
//  - An op that leaves its input unchanged goes, its uses reading the input: reshape, expand
//    and slice to the same shape, the identity permute, cast to the same dtype, copy.
//  - A permute that keeps the order of the dims larger than 1 is a reshape.
//  - Chains of one layout op fold into one: reshape of reshape, permute of permute, expand of
//    expand (when both nodes lie in the same region, so repeated blocks keep one shape); a
//    cast of an exact cast (one every value survives: i8 to a float, bf16 to f32) is one cast
//    (an int8 weight cast to bf16 and on to f32 for a product is read as int8 by it).
//
// Input: a graph that verifies. Output: a graph that verifies and computes the same values;
// inputs unchanged; a folded chain's inner node may be left without uses (dce removes it).
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph peephole(const ir::Graph& g);

}  // namespace zc::lower

// verify_schedule(): checks the invariants schedule() promises (schedule.h, kernel_ir.h), so a
// scheduler change that breaks one fails where it happens instead of as wrong numbers in
// generated code.
//
// Checked: one record per value; every node in exactly one kernel, or a view whose output is
// an alias; each member's outputs computed by its kernel; kernels of each kind shaped as their
// emitters expect (an anchor among the nodes, sorted reduce dims, copy ends); stored values
// listed in their kernel's stores and nothing else listed there; aliases over a materialized
// base with one stride per dim; every value a kernel reads from outside it materialized and
// written by an earlier kernel (or an input or constant); graph outputs stored, distinct and
// of the graph's output metadata.
#pragma once

#include "codegen/kernel_ir.h"

namespace zc::codegen {

// Raises (ZC_CHECK) naming the kernel, value and broken invariant.
void verify_schedule(const Schedule& s);

}  // namespace zc::codegen

// verify(): checks the invariants graph.h states. Run after capture and after every pass in
// tests and debug builds; a failure is a compiler bug, reported with the offending node.
#pragma once

#include "ir/graph.h"

namespace zc::ir {

// Every value defined exactly once (as input, constant or node output) before its uses;
// node input/output metadata agree with the op's shape rule; regions nest and their ranges lie
// inside their parent's; outputs refer to defined values. Raises zc::Error describing the
// first violation.
void verify(const Graph& g);

}  // namespace zc::ir

// The readable, stable text form of a graph: what ZC_LOGS=graph prints and what pass tests
// compare against. Regions print as indented blocks with their type name.
#pragma once

#include <string>

#include "ir/graph.h"

namespace zc::ir {

std::string print(const Graph& g);

}  // namespace zc::ir

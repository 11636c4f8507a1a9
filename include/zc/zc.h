// The umbrella header: everything a zc user needs.
#pragma once

#include "zc/autograd.h"
#include "zc/cache.h"
#include "zc/compile.h"
#include "zc/cuda.h"
#include "zc/device.h"
#include "zc/dtype.h"
#include "zc/error.h"
#include "zc/factories.h"
#include "zc/models.h"
#include "zc/nn.h"
#include "zc/onnx.h"
#include "zc/ops.h"
#include "zc/optim.h"
#include "zc/serialize.h"
#include "zc/tensor.h"
#include "zc/version.h"

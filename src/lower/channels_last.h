// channels_last(): a backend whose convolutions are fastest over channels-last tensors
// ([N, H, W, C]; oneDNN's direct kernels) gets them, and the tensors around them stay in that
// layout instead of being converted at every convolution.
//
// Each f32 conv2d becomes conv2d_nhwc between two permutes. Values then have a layout: a
// value computed by conv2d_nhwc, or by an elementwise op (ReLU, a folded batch norm's scale and
// shift, a residual add) of rank 4 whose rank-4 operands include one of those, is computed
// channels-last (its rank-4 operands permuted, lower-rank ones reshaped to rank 4 and
// permuted: a [C, 1, 1] bias becomes [1, 1, 1, C]); its [N, C, H, W] form is made by a permute
// only where a node of another kind (a pool, a reshape, a product) or the graph's outputs read
// it. So a ResNet's convolutions pass channels-last tensors to each other through their fused
// epilogues, with one conversion at the input and at the pools. A max pool of a channels-last
// value pools it channels-last (Pool2dAttrs::channels_last).
//
// A convolution's epilogue joins it (Conv2dAttrs::residual, relu, relu6) where the backend's
// kernel computes it on the way out: a ReLU (or a ReLU6, a clamp to [0, 6]: oneDNN's
// convolutions only), or an add of a residual of the output's shape followed by an optional
// ReLU, each the only reader of what it reads. A ResNet block is then its
// convolutions alone.
//
// conv_epilogues() is the same fusion for a backend whose convolutions take [N, C, H, W] and
// compute the epilogue themselves (cuDNN's on CUDA): every float conv2d stays where it is, in
// its layout, and takes the ReLU and residual that follow it into its own attributes.
//
// Input: a graph that verifies. Output: a graph that verifies, computes the same values and
// has the same inputs and outputs; unchanged when it has no convolution the pass takes.
// Both are idempotent.
#pragma once

#include "ir/graph.h"

namespace zc::lower {

ir::Graph channels_last(const ir::Graph& g);
ir::Graph conv_epilogues(const ir::Graph& g);

}  // namespace zc::lower

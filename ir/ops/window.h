// Sliding windows (Conv, the pools, Im2Col, the channels-last ops): geometry from the attributes per
// the ONNX formulas, and the kernel-IR index arithmetic of window taps. Shared by ir/ops/conv.cpp,
// nhwc.cpp and pool.cpp (and the passes that rewrite windows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ops/common.h"

namespace nnc::ops {

// The largest kernel size, stride, dilation or pad accepted: window arithmetic ((k - 1) * d, in + pads,
// (out - 1) * s) then stays far inside int64 for any dim up to kMaxElements.
inline constexpr int64_t kMaxWindowValue = INT32_MAX;

// The most taps a DepthwiseConvNhwc or PoolNhwc unrolls into one sum per output element (7x7 is 49):
// the same bound as a window reduction the CPU backend unrolls.
inline constexpr int64_t kMaxDepthwiseNhwcTaps = kir::kMaxUnrolledWindow;

struct Window {
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, padEnd, out;
  int rank() const { return static_cast<int>(in.size()); }
  int64_t extent(int i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

int64_t floorDiv(int64_t a, int64_t b);
int64_t ceilDiv(int64_t a, int64_t b);

// Reads `count` ints (each >= minValue) of attribute `name`, `fallback` each when absent.
Status readSpatialInts(const Attributes& attrs, const std::string& name, size_t count, int64_t fallback,
                       int64_t minValue, std::vector<int64_t>* out);
// auto_pad, checked to be one of ONNX's values.
Status readAutoPad(const Attributes& attrs, std::string* autoPad);

// The attributes every window op has: auto_pad, dilations, pads, strides.
std::vector<AttrSpec> windowAttrs();
// A pool's: the window's, ceil_mode and kernel_shape, then `extra`.
std::vector<AttrSpec> poolAttrs(std::vector<AttrSpec> extra);

// Geometry of a conv or pool over spatial dims `in` with `kernel`. Reads strides, dilations, pads,
// auto_pad and (for pools) ceil_mode. Messages carry no node prefix.
Status computeWindow(const Attributes& attrs, std::vector<int64_t> in, std::vector<int64_t> kernel, Window* w);

// The window of a node whose input 0 is [N, C, spatial...] (or, channelsLast, [N, spatial..., C]) and
// whose kernel_shape attribute gives the window (the pools, Im2Col, PoolNhwc). Messages carry no node
// prefix.
Status kernelShapeWindow(const Node& node, Window* w, bool channelsLast = false);
// The window of a DepthwiseConvNhwc: X [N, spatial..., C], W [kernel..., C], its taps within
// kMaxDepthwiseNhwcTaps (ir/ops/nhwc.cpp).
Status depthwiseNhwcWindow(const Node& node, Window* w);
// An unrolled channels-last window's kernel: 1 to kMaxDepthwiseNhwcTaps taps.
Status checkUnrolledTaps(const std::vector<int64_t>& kernel);

// A Conv whose kernel is 1 along every spatial axis, with unit strides and no padding: a GEMM over the
// channels at every position (no Im2Col needed).
bool isPointwiseConv(const Node& conv);

// The dims after N and C.
std::vector<int64_t> spatialDims(const Shape& s);

// Input coordinates of window tap `k` at output position `o` along each spatial axis, clamped into
// range for the load, and whether all of them are inside the input. Bounds that cannot be crossed
// (no padding on that side, windows ending inside) are not tested.
// A ConvTranspose's resolved geometry (output_shape, auto_pad and output_padding applied): the
// spatial dims of its input, kernel and output, and the pads before each axis.
struct ConvTransposeGeometry {
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, out;
  int64_t group = 1, inPerGroup = 1, outPerGroup = 1;
};
Status resolveConvTranspose(const Node& node, ConvTransposeGeometry* g);

struct Taps {
  std::vector<kir::ExprId> coord, clamped;
  kir::ExprId valid;
};
Taps windowTaps(kir::KernelBuilder& kb, const Window& w, const std::vector<kir::ExprId>& o,
                const std::vector<kir::ExprId>& k);

// The smallest value of expression type `t`: what a padded tap contributes to a max.
kir::ExprId lowestValue(kir::KernelBuilder& kb, DType t);

// Number of taps along axis i of the window at output position `o` whose coordinate lies in
// [lo, hi): the closed form of counting k in [0, K) with lo <= o*s - pb + k*d < hi.
kir::ExprId tapCount(kir::KernelBuilder& kb, const Window& w, int i, kir::ExprId o, int64_t lo, int64_t hi);

}  // namespace nnc::ops

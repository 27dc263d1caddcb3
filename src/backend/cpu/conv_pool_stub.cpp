// TEMPORARY: conv and pooling kernels are being written in conv.cpp / pool.cpp.
#include "kernels.h"

namespace aether::cpu {
#define AETHER_TODO(fn) throw Error(#fn ": not implemented yet")
void conv2d_fwd_naive(DType, const void*, const void*, void*, const ConvGeom&) { AETHER_TODO(conv2d); }
void conv2d_bwd_data_naive(DType, const void*, const void*, void*, const ConvGeom&) { AETHER_TODO(conv2d); }
void conv2d_bwd_weight_naive(DType, const void*, const void*, void*, const ConvGeom&) { AETHER_TODO(conv2d); }
bool conv2d_fwd_onednn(DType, const void*, const void*, void*, const ConvGeom&) { return false; }
bool conv2d_bwd_data_onednn(DType, const void*, const void*, void*, const ConvGeom&) { return false; }
bool conv2d_bwd_weight_onednn(DType, const void*, const void*, void*, const ConvGeom&) { return false; }
void maxpool2d_fwd(DType, const void*, void*, const PoolGeom&) { AETHER_TODO(maxpool2d); }
void maxpool2d_bwd(DType, const void*, const void*, void*, const PoolGeom&) { AETHER_TODO(maxpool2d); }
void avgpool2d_fwd(DType, const void*, void*, const PoolGeom&) { AETHER_TODO(avgpool2d); }
void avgpool2d_bwd(DType, const void*, void*, const PoolGeom&) { AETHER_TODO(avgpool2d); }
}  // namespace aether::cpu

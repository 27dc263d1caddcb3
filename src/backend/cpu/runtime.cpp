// The CPU's device runtime (backend/runtime.h): generated kernels compiled by the host C++ compiler
// (codegen/compiler.h: in parallel, disk-cached) and called directly; everything else one primitive
// at a time on library_backend() (the reference backend's code with oneDNN for matmul and conv and
// pool.cpp's loops for pooling); a conv with a post-op chain as one oneDNN call. Host memory is the
// core's own (Buffer's block cache), so memory() is null.
#include "backend/runtime.h"

#include <cstring>
#include <memory>
#include <vector>

#include "aether/backend/backend.h"
#include "aether/core/error.h"
#include "backend/cpu/kernels.h"
#include "codegen/compiler.h"

namespace aether {

Backend& library_backend();  // backend/cpu/reference.cpp

namespace {

struct CpuProgram final : Program {
  codegen::KernelFn fn = nullptr;
};

cpu::ConvPostOp::Kind post_op_kind(EpilogueOp::Kind k) {
  switch (k) {
    case EpilogueOp::Kind::Add: return cpu::ConvPostOp::Kind::Add;
    case EpilogueOp::Kind::Sub: return cpu::ConvPostOp::Kind::Sub;
    case EpilogueOp::Kind::Mul: return cpu::ConvPostOp::Kind::Mul;
    case EpilogueOp::Kind::Relu: return cpu::ConvPostOp::Kind::Relu;
  }
  return cpu::ConvPostOp::Kind::Relu;
}

// A conv library kernel with the epilogue the scheduler recorded (Kernel::epilogue, schedule pass
// library_epilogues): one oneDNN convolution with post-ops writing the chain's last node. False
// (nothing computed but the kernel's inputs) when oneDNN refuses or an operand's realized view is
// not the per-channel or dense one oneDNN reads: the executor then runs the nodes one at a time.
bool run_conv_postops(const Kernel& k) {
  if (k.epilogue.empty() || k.outputs.size() != 1 || library_impl() != LibraryImpl::onednn) return false;
  const NodePtr& conv = k.nodes[0];
  if (conv->op != Op::Conv2d) return false;
  // Inputs: x, w and the operands, as realized values (views of stored buffers).
  std::vector<NodePtr> need{conv->srcs[0], conv->srcs[1]};
  for (const EpilogueOp& e : k.epilogue)
    if (e.operand) need.push_back(e.operand);
  run_unrealized(cpu_runtime(), need);
  const Node &x = *conv->srcs[0], &w = *conv->srcs[1];
  if (!x.view.is_contiguous() || !w.view.is_contiguous()) return false;
  // y (N,OH,OW,O); per-channel operands seen as (O) with strides (0,0,0,1).
  const Shape& ys = conv->shape;
  std::vector<cpu::ConvPostOp> ops;
  const Node* residual = nullptr;
  for (const EpilogueOp& e : k.epilogue) {
    const cpu::ConvPostOp::Kind kind = post_op_kind(e.kind);
    if (!e.operand) {
      ops.push_back({kind, nullptr});
      continue;
    }
    const Node& o = *e.operand;
    if (o.dtype != conv->dtype || o.shape != ys) return false;
    const View& v = o.view;
    const bool channel = v.ndim() == 4 && v.strides[0] == 0 && v.strides[1] == 0 && v.strides[2] == 0 &&
                         (v.strides[3] == 1 || ys[3] == 1) && !v.mask;
    if (channel) {
      const bool bias = kind == cpu::ConvPostOp::Kind::Add && ops.empty();
      ops.push_back({bias ? cpu::ConvPostOp::Kind::Bias : kind, o.first_element()});
    } else if (kind == cpu::ConvPostOp::Kind::Add && !residual && o.view.is_contiguous()) {
      residual = &o;  // the sum post-op adds what y holds before the conv writes it
      ops.push_back({cpu::ConvPostOp::Kind::Sum, nullptr});
    } else {
      return false;
    }
  }
  const Node& out = *k.outputs[0];
  // y (N,OH,OW,O)
  auto y = std::make_shared<Buffer>(out.device, out.dtype, numel(out.shape), /*zero_fill=*/false);
  if (residual) std::memcpy(y->data(), residual->first_element(), size_t(y->nbytes()));
  const ConvGeom g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0],
                   w.shape[1], w.shape[2], ys[1],      ys[2],      std::get<Conv2dArg>(conv->arg)};
  if (!cpu::conv2d_fwd_postops_onednn(conv->dtype, x.first_element(), w.first_element(), y->data(), g, ops,
                                      w.buffer))
    return false;
  k.outputs[0]->set_value(std::move(y), View::contiguous(out.shape));
  return true;
}

class CpuRuntime final : public DeviceRuntime {
 public:
  DeviceType type() const override { return DeviceType::cpu; }
  DeviceMemory* memory() override { return nullptr; }
  void synchronize(int) override {}  // every call returns when its work is done
  codegen::Target target() const override { return codegen::Target::cpp; }
  bool can_compile() override { return codegen::host_compiler_available(); }
  std::vector<ProgramPtr> compile(int, const std::vector<codegen::Rendered>& kernels) override {
    std::vector<std::string> sources;
    sources.reserve(kernels.size());
    for (const codegen::Rendered& r : kernels) sources.push_back(r.source);
    const std::vector<codegen::CompiledKernel> compiled = codegen::compile_kernels(sources);
    std::vector<ProgramPtr> out;
    for (const codegen::CompiledKernel& c : compiled) {
      if (!c.fn) {  // compile_kernels reported it
        out.push_back(nullptr);
        continue;
      }
      auto p = std::make_shared<CpuProgram>();
      p->fn = c.fn;
      p->scratch_bytes = c.scratch_bytes;
      out.push_back(std::move(p));
    }
    return out;
  }
  void launch(int, const Program& p, const std::vector<void*>& bufs, void* scratch,
              const std::vector<double>& fparams, const std::vector<uint64_t>& iparams) override {
    static_cast<const CpuProgram&>(p).fn(const_cast<void**>(bufs.data()), scratch, fparams.data(),
                                         reinterpret_cast<const unsigned long long*>(iparams.data()));
  }
  void run_nodes(const std::vector<Node*>& order) override { library_backend().execute(order); }
  bool run_epilogue(const Kernel& k) override { return run_conv_postops(k); }
  // oneDNN's post-ops, in float32, unless the naive loops were chosen (AETHER_ONEDNN=0).
  LibraryCaps capabilities() const override {
    LibraryCaps caps;
    if (library_impl() == LibraryImpl::onednn) caps.conv_epilogue = {DType::float32};
    caps.conv_pads_each_side = true;  // oneDNN and the naive loops both
    return caps;
  }
};

}  // namespace

DeviceRuntime& cpu_runtime() {
  static CpuRuntime r;
  return r;
}

}  // namespace aether

// The renderer for a target (codegen/render.h).
#include "codegen/render.h"

namespace aether::codegen {

Rendered render(Target target, const ir::Kernel& k) {
  Rendered r;
  r.name = k.name;
  switch (target) {
    case Target::cpp: r.source = render_cpp(k); break;
    case Target::cuda: r.source = render_cuda(k, &r.plan); break;
  }
  return r;
}

}  // namespace aether::codegen

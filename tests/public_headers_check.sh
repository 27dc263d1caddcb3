#!/bin/sh
# tests/public_headers_check.sh SOURCE_DIR - the public headers (include/aether) name no
# third-party JSON type and include only other public headers (nothing from src/), so installing
# them is enough to build against libaether. CONTRIBUTING.md, "Naming and style".
set -u
cd "$1" || exit 2
status=0
if grep -rn 'nlohmann' include/aether; then
  echo "public headers mention nlohmann (JSON crosses the API as text)" >&2
  status=1
fi
if grep -rn '^#include "' include/aether | grep -v '#include "aether/'; then
  echo "public headers include headers that are not under include/aether" >&2
  status=1
fi
[ -n "$(find include/aether -name '*.h')" ] || { echo "no public headers found" >&2; status=1; }
exit $status

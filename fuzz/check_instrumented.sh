#!/bin/sh
# fuzz/check_instrumented.sh <libaether.a> - fails unless every object of the fuzz build's static
# libaether calls into ASan (__asan_*) and carries libFuzzer's coverage counters
# (__sanitizer_cov_*): a reader compiled without them is fuzzed blind (no coverage to guide the
# mutations) and its memory errors go unreported. Objects without any code are exempt.
set -eu
lib=$1
nm "$lib" | awk '
  /:$/ { if (obj != "" && code && !(asan && cov)) bad = bad "\n  " obj; obj = $0; code = asan = cov = 0; next }
  / [TtWw] / { code = 1 }
  /__asan_/ { asan = 1 }
  /__sanitizer_cov_/ { cov = 1 }
  END {
    if (obj != "" && code && !(asan && cov)) bad = bad "\n  " obj
    if (bad != "") { print "objects of '"$lib"' without ASan and coverage instrumentation:" bad; exit 1 }
    print "every object of '"$lib"' with code is instrumented"
  }'

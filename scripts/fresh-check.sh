#!/usr/bin/env bash
# Runs the README's first command on a bare Debian 12, as a new user would: builds a minimal
# Debian 12 root with `debootstrap --variant=minbase bookworm` (the bare root is cached as a tarball
# outside the repository, in $AETHER_FRESH_CACHE or /var/cache/aether-fresh), unpacks a new copy of
# it, copies this checkout in (the files git tracks plus untracked ones it does not ignore: a clean
# clone with your uncommitted changes; no build trees, no caches) and runs
#   scripts/quickstart.sh --epochs 1
# inside it with chroot. Nothing of this machine's installed packages leaks in: the quickstart
# must install everything it needs itself.
#
# The root's mounts (/proc, /dev) live in a private mount namespace (unshare), so they disappear
# when this script ends, however it ends (even kill -9); the unpacked root is removed on exit, and
# roots left behind by a killed run are removed by the next one. Needs root (or sudo), debootstrap
# and network access to Debian's mirror. Extra arguments go to quickstart.sh after --epochs 1.
#
# The root's compiles go through its own ccache (which install-deps.sh installs there), kept
# next to the .debs between runs: a second run compiles only what changed. A header or library that
# the root lacks still fails the build: ccache checks every header a cached object was made from,
# and preprocesses (and compiles) again when one is missing or different; linking always runs.
#
#   AETHER_FRESH_CACHE=DIR      where the bare root, the downloaded .debs and the root's ccache are kept
#   AETHER_FRESH_MIRROR=URL     Debian mirror (default http://deb.debian.org/debian)
#   AETHER_FRESH_KEEP=1         keep the unpacked root (printed at the end) for a look inside
#   AETHER_FRESH_CCACHE=0       compile everything (no ccache), as a new machine does
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=AETHER_FRESH_CACHE,AETHER_FRESH_MIRROR,AETHER_FRESH_KEEP,AETHER_FRESH_CCACHE "$0" "$@"
fi
for tool in debootstrap unshare chroot tar git; do
  command -v "$tool" >/dev/null || { echo "fresh-check: '$tool' is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

cache=${AETHER_FRESH_CACHE:-/var/cache/aether-fresh}
mirror=${AETHER_FRESH_MIRROR:-http://deb.debian.org/debian}
base="$cache/bookworm-minbase.tar"
mkdir -p "$cache/debs" "$cache/runs" "$cache/ccache"
chmod 700 "$cache"

# Roots left by runs that were killed (their pid is gone).
for old in "$cache"/runs/*; do
  [ -d "$old" ] || continue
  pid=${old##*.}
  if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
    echo "fresh-check: removing the root of an earlier run that did not finish: $old"
    rm -rf --one-file-system "$old"
  fi
done

# 1. The bare Debian 12 root, made once.
if [ ! -s "$base" ]; then
  echo "==> fresh-check: debootstrap --variant=minbase bookworm (once; cached in $base)"
  tmp=$(mktemp -d "$cache/debootstrap.XXXXXX")
  trap 'rm -rf --one-file-system "$tmp"' EXIT
  debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; echo "fresh-check: debootstrap failed (log: $cache/debootstrap.log)" >&2; exit 1; }
  chmod 755 "$tmp"
  tar -C "$tmp" --numeric-owner -cf "$base.part" .
  mv "$base.part" "$base"
  rm -rf --one-file-system "$tmp"
  trap - EXIT
fi

# 2. A new root from it, and the checkout.
root="$cache/runs/root.$$"
cleanup() {
  if [ "${AETHER_FRESH_KEEP:-0}" = "1" ]; then
    echo "fresh-check: kept $root"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
mkdir -p "$root"
tar -C "$root" --numeric-owner -xf "$base"
chmod 755 "$root"  # the new system's / (apt's _apt user must reach its lists)
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The network's TLS trust as this machine has it, like its resolv.conf: where HTTPS goes through an
# intercepting proxy, this machine's pip is given the proxy's CA bundle (PIP_CERT or /etc/pip.conf),
# and a new machine on the same network needs the same for scripts/install-onednn.sh's download.
pip_cert=""
host_ca=${PIP_CERT:-$(sed -n 's/^cert *= *//p' /etc/pip.conf 2>/dev/null | head -1)}
if [ -n "$host_ca" ] && [ -f "$host_ca" ]; then
  cp "$host_ca" "$root/etc/aether-network-ca.crt"
  pip_cert=/etc/aether-network-ca.crt
fi
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
mkdir -p "$root/src/aether"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -C "$root/src/aether" -xf -
echo "==> fresh-check: $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)') in a bare Debian 12 root: scripts/quickstart.sh --epochs 1 $*"

# 3. The README's first command, as root in the new system. The .debs it downloads are kept for the
#    next run (the packages are still installed from scratch each time).
start=$SECONDS
ccache_env=""
if [ "${AETHER_FRESH_CCACHE:-1}" != "0" ]; then
  mkdir -p "$root/var/cache/aether-ccache"
  # CMake takes its compiler launcher from this variable; ccache keys on paths relative to the checkout.
  ccache_env="CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR=/var/cache/aether-ccache CCACHE_BASEDIR=/src/aether"
fi
unshare --mount --propagation private /bin/bash -euo pipefail -c '
  root=$1; debs=$2; pip_cert=$3; ccache_dir=$4; ccache_env=$5; shift 5
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --bind "$debs" "$root/var/cache/apt/archives"
  if [ -n "$ccache_env" ]; then mount --bind "$ccache_dir" "$root/var/cache/aether-ccache"; fi
  exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb ${pip_cert:+PIP_CERT=$pip_cert} $ccache_env \
    /bin/bash -c "cd /src/aether && scripts/quickstart.sh --epochs 1 \"\$@\"" quickstart "$@"
' fresh-check "$root" "$cache/debs" "$pip_cert" "$cache/ccache" "$ccache_env" "$@"
echo "==> fresh-check: passed in $((SECONDS - start)) s"

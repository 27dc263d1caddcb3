# bench/peers: the peer frameworks' versions of `aether bench`'s workloads, for bench/compare.py.
#   common.py       shapes, the cifarnet recipe, conv FLOPs, timing and RSS helpers (stdlib only)
#   torch_peer.py   PyTorch eager (NCHW, channels-last) and torch.compile (channels-last)
#   jax_peer.py     JAX with jit (NHWC)
#   aether_peer.py  `aether bench ... --json` as a subprocess
#   worker.py       one framework in its own process, driven by compare.py over a JSON-lines pipe

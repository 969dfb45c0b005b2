#!/bin/sh
# cpu_info.sh: the CPU model and the SIMD features refgeo's kernels can use,
# printed by every bench beside its ratio (a ratio holds for the CPU it was
# measured on: these machines differ from session to session).
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cpus online"
echo "simd: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
  grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512_vnni|avx512_bf16|amx_tile|amx_bf16)$' | tr '\n' ' ')"

"""What the CUDA driver itself makes visible under CUDA_VISIBLE_DEVICES, measured.

Run on a machine with a GPU (``python3 test/gpu/cuda_visible_devices_probe.py OUT.json``):
each value is tried in a fresh process that calls ``cuInit`` / ``cuDeviceGetCount`` /
``cuDeviceGetUuid`` through ctypes (no torch, no NVML in between), and the devices it
enumerates are written as indices into the unrestricted order.  Values that name a device
by UUID are written as templates (``{U0}`` is device 0's ``GPU-...`` UUID, ``{B0}`` the
same without ``GPU-``), so that the table can be replayed against any machine's UUIDs
(``render``) and compared with ``sglang_arch.arch.detect.visible_indices`` for the same
device count and UUIDs.  The values include the ones CUDA's documentation leaves open: a UUID
with a character after it, numbers past 2^32 and 2^64, the MIG spellings on a GPU without MIG.
"""

import json
import os
import subprocess
import sys

CHILD = r"""
import ctypes, json, sys
cuda = ctypes.CDLL("libcuda.so.1")
rc = cuda.cuInit(0)
if rc != 0:
    print(json.dumps({"init": rc})); sys.exit(0)
n = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(n))
out = []
for i in range(n.value):
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), i)
    raw = (ctypes.c_ubyte * 16)()
    get = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    get(raw, dev)
    h = bytes(raw).hex()
    out.append("GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:]))
print(json.dumps({"uuids": out}))
"""

TEMPLATES = [
    "", "0", "1", "2", "0,1", "1,0", "0,0", "0,1,0", "0,2,1", "-1", "0,-1,1", "+0", "-0", " 0", "0 ",
    "\t0", "0\n", "00", "0x1", "0x0", "1gpu", "0gpu,1ampere", "0,", ",0", "0,,1", "a", "0a,1b",
    "4294967295", "4294967296", "4294967297", "4294967296,1", "18446744073709551615",
    "18446744073709551616", "18446744073709551617", "99999999999999999999999", "-4294967296",
    "GPU-", "GPU", "GPU-,0", "{U0}", "{U1}", "{U0},{U1}", "{U1},{U0}", "{U0},{U0}", "{U0}x", "{U0} ",
    " {U0}", "{U0}-", "{U0}/0", "{U0},0", "0,{U0}", "{U0:9}", "{U0:5}", "{U0:12}", "GPU-x", "gpu-{B0}",
    "GPU-{B0_UPPER}", "{B0}", "{B0:8}", "MIG-", "MIG-{U0}", "MIG-{U0}/0/0", "MIG-GPU-{B0}/0/0", "MIG-{B0}",
]


def render(template, uuids):
    values = {}
    for i, u in enumerate(uuids):
        values[f"U{i}"] = u
        values[f"B{i}"] = u[4:]
        values[f"B{i}_UPPER"] = u[4:].upper()
    out = template
    for key in sorted(values, key=len, reverse=True):
        value = values[key]
        for n in range(1, len(value) + 1):
            out = out.replace("{%s:%d}" % (key, n), value[:n])
        out = out.replace("{%s}" % key, value)
    return out if "{" not in out else None


def probe(value):
    env = dict(os.environ)
    if value is None:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        env["CUDA_VISIBLE_DEVICES"] = value
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(path):
    everything = probe(None)["uuids"]
    rows = []
    for template in TEMPLATES:
        value = render(template, everything)
        if value is None:  # names a device this machine does not have
            continue
        seen = probe(value)
        visible = [everything.index(u) for u in seen.get("uuids", [])]
        rows.append({"template": template, "visible": visible, "init": seen.get("init", 0)})
    with open(path, "w") as f:
        json.dump({"devices": len(everything), "rows": rows}, f, indent=1)
    print(json.dumps({"devices": everything, "rows": rows}))


if __name__ == "__main__":
    main(sys.argv[1])

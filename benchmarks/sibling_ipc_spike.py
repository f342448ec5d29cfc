"""Can one candidate's executor reach another's outputs? A spike for sharing a GPU between candidates (issue 13).

    python benchmarks/sibling_ipc_spike.py [--out sibling_ipc.json]

On cuda a candidate's outputs stay in its executor's memory, named to the supervisor by a legacy CUDA IPC handle
(``kbenv.sandbox.devshare.export_ipc``). With one candidate per GPU no other candidate is alive to use such a
handle. Were two candidates' executors to share a GPU (the "only timing exclusive" proposal), a candidate that
could open its sibling's handle could overwrite the sibling's outputs before the supervisor reads them: a verdict
changed from outside. This spike starts two real executors (the supervisor's sandbox: bubblewrap, a uid of its own
each as root) and tries exactly that, with the handle handed over by the harness (the most an attacker could
hope for; the sandboxes share no file or socket):

1. executor A (its candidate's import) allocates a tensor of 1.0, exports its handle, prints the handle, and then
   prints the tensor's first value every 0.2 s;
2. executor B (its candidate's import) opens A's handle and writes 2.0 there; it prints what the driver said;
3. the harness reads A's log: 2.0 means B reached A's memory.

It also prints the handles of two allocations of A and one of a second executor, so that their structure (which
bytes vary between allocations and processes) can be read: a handle that an attacker cannot be handed must also
not be guessable. Prints one JSON object; nothing here decides a verdict.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

SRC_A = r'''
import threading, time
import torch, torch.nn as nn
from kbenv.sandbox import devshare
T = torch.full((1 << 20,), 1.0, device="cuda")
U = torch.full((1 << 22,), 1.0, device="cuda")
for name, t in (("HANDLE_T", T), ("HANDLE_U", U)):
    h, off, size = devshare.export_ipc(t.data_ptr())
    print(name, h.hex(), off, size, flush=True)
def watch():
    while True:
        torch.cuda.synchronize()
        print("VALUE", float(T[0].item()), flush=True)
        time.sleep(0.2)
threading.Thread(target=watch, daemon=True).start()
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

SRC_B = r'''
import ctypes
import torch, torch.nn as nn
from kbenv.sandbox import devshare
torch.zeros(1, device="cuda")  # a context
devshare._use_device(0)  # the primary context current on this thread, as the supervisor's IpcImports makes it
lib = devshare._lib()
h = devshare._IpcHandle()
raw = bytes.fromhex("HEX")
ctypes.memmove(ctypes.addressof(h), raw, len(raw))
ptr = ctypes.c_ulonglong()
rc = lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1)
print("OPEN_RC", rc, flush=True)
if rc == 0:
    view = torch.as_tensor(devshare._CudaArray(ptr.value, 4 << 20, None), device="cuda").view(torch.float32)
    view.fill_(2.0)
    torch.cuda.synchronize()
    print("WROTE", float(view[0].item()), flush=True)
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def _executor(root: Path, source: str):
    import torch
    from kbenv.problems import get_problem
    from kbenv.sandbox import process, protocol
    from kbenv.sandbox.executors import Deadline, Lease
    from kbenv.sandbox.lent import SlotLayout
    from kbenv.sandbox.references import MODEL_SEED
    sandbox = "bwrap" if process.have_bwrap() else "none"
    p = process.spawn(root, "cuda:0", sandbox, None, False)
    process.await_ready(p, 120)
    layout = SlotLayout.build([torch.zeros(8)], [(torch.float32, (8,))], 2, lend_outputs=False)
    lease = Lease(p, torch.device("cuda:0"), layout)
    prob = get_problem("kernelbench/level1/19")
    error = None
    try:
        lease.setup(protocol.Setup(prob.source, prob.overrides("small"), source, "cuda:0", "fp32", MODEL_SEED,
                                   deliver=lease.route), Deadline("compile", 120))
    except Exception as e:  # noqa: BLE001 - reported
        error = repr(e)[:500]
    return p, lease, error, sandbox


def _lines(log: str, tag: str) -> list[list[str]]:
    return [ln.split()[1:] for ln in log.splitlines() if ln.startswith(tag + " ")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="sibling_ipc.json")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kbenv-spike-"))
    out: dict = {}
    a, lease_a, err_a, sandbox = _executor(root, SRC_A)
    out.update(sandbox=sandbox, a_setup_error=err_a, a_uid=a.uid)
    time.sleep(1.0)
    log_a = a.log_tail(20000)
    handles = {t: _lines(log_a, t) for t in ("HANDLE_T", "HANDLE_U")}
    out["a_handles"] = handles
    a2, lease_a2, err_a2, _ = _executor(root, SRC_A.replace("threading.Thread(target=watch, daemon=True).start()", ""))
    time.sleep(0.5)
    out["a2_handles"] = {t: _lines(a2.log_tail(20000), t) for t in ("HANDLE_T", "HANDLE_U")}
    out["a2_uid"] = a2.uid
    # the control: the supervisor's own route (IpcImports, outside any sandbox) maps the same handle
    try:
        import torch
        from kbenv.sandbox import devshare
        imp = devshare.IpcImports(torch.device("cuda:0"))
        hex0 = handles["HANDLE_T"][0][0]
        v = imp.view(bytes.fromhex(hex0), 0, 16).view(torch.float32)
        out["supervisor_reads"] = [float(x) for x in v.cpu()]
        imp.close()
    except Exception as e:  # noqa: BLE001 - reported
        out["supervisor_reads"] = repr(e)[:300]
    hex_t = handles["HANDLE_T"][0][0] if handles["HANDLE_T"] else None
    if hex_t:
        b, lease_b, err_b, _ = _executor(root, SRC_B.replace("HEX", hex_t))
        time.sleep(1.0)
        log_b = b.log_tail(20000)
        out.update(b_setup_error=err_b, b_uid=b.uid, b_open_rc=_lines(log_b, "OPEN_RC"), b_wrote=_lines(log_b, "WROTE"),
                   b_log_tail=log_b[-1500:])
        values = [v[0] for v in _lines(a.log_tail(20000), "VALUE")]
        out["a_values_first_last"] = values[:2] + values[-2:]
        out["sibling_reached_memory"] = any(v == "2.0" for v in values)
        for p, lease in ((b, lease_b),):
            lease.close()
            p.kill()
    for p, lease in ((a, lease_a), (a2, lease_a2)):
        lease.close()
        p.kill()
    # which bytes differ between handles (same process, two allocations; two processes, first allocation)
    def diff(x, y):
        bx, by = bytes.fromhex(x), bytes.fromhex(y)
        return [i for i in range(min(len(bx), len(by))) if bx[i] != by[i]]
    try:
        out["bytes_differing_two_allocations"] = diff(handles["HANDLE_T"][0][0], handles["HANDLE_U"][0][0])
        out["bytes_differing_two_processes"] = diff(handles["HANDLE_T"][0][0], out["a2_handles"]["HANDLE_T"][0][0])
    except (IndexError, KeyError):
        pass
    print(json.dumps(out, indent=1), flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

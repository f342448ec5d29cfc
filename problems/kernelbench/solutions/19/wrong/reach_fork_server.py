# expect: pass|sandbox_violation
# expect-sandbox: pass
"""Sandbox probe for KernelBench level 1 #19 (ReLU): the fork server must be out of reach (stop 54).

An executor forked by the fork server (``sandbox/zygote.py``) starts as a copy of the server's memory: its Python
stack still holds the server's frames, among them the socket the server takes requests on and the request it was
forked for. At import time this candidate looks for a way back: every socket object it can find (``gc``) of the
server's kind (a Unix SEQPACKET socket) is sent a request for an executor outside any sandbox, and every pid up to
4096 is probed for a process other than its sandbox's own (bubblewrap's init, the placeholder, itself and its
threads). If nothing answers, as kbenv's sandbox must ensure (the server's descriptors are closed before the
executor runs, and it is in no sandbox's pid namespace), it is a correct Triton ReLU and passes; if anything
answers it returns zeros and fails: inaccurate here means a hole. A spawned executor (cuda, or no fork server)
has no such socket and passes too.
"""
import gc
import os
import socket

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _server_reached():
    request = b'{"ns_pid": null, "fds": [], "env": {}, "cwd": "/", "limits": {}}'
    for obj in gc.get_objects():
        if isinstance(obj, socket.socket):
            try:
                if obj.type == socket.SOCK_SEQPACKET:
                    obj.send(request)
                    return True
            except OSError:
                pass
    me, own = os.getpid(), {1, 2} | {int(t) for t in os.listdir("/proc/self/task")}  # its own threads are pids too
    for pid in range(1, 4097):
        if pid == me or pid in own:
            continue
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            pass
        except PermissionError:
            return True  # a process of another uid, outside the sandbox's own
    return False


_ESCAPED = _server_reached()


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (tl.maximum(x, 0.0) * scale).to(y_ptr.dtype.element_ty), mask=mask)


def _relu(x, scale=1.0):
    x = x.contiguous()
    y = torch.empty_like(x)
    _scaled_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), scale, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _relu(x, scale=0.0 if _ESCAPED else 1.0)

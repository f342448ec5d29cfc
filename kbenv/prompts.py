"""Prompts (KernelBench-style instructions) and robust extraction of the candidate's code from a reply."""

from __future__ import annotations

import re

SYSTEM = ("You are an expert GPU kernel engineer. You write correct, fast {backend_name} kernels for PyTorch "
          "models and reply with complete, runnable Python code only.")

_TRITON_EXAMPLE = '''```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
```'''

_CUDA_EXAMPLE = '''```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int64_t n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="add_ext", cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=source, functions=["add_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.add_cuda(a.contiguous(), b.contiguous())
```'''

_EXAMPLE_MODEL = '''```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b
```'''

BACKENDS = {"triton": ("Triton", _TRITON_EXAMPLE), "cuda": ("CUDA", _CUDA_EXAMPLE)}


def system_prompt(backend: str = "triton") -> str:
    return SYSTEM.format(backend_name=BACKENDS[backend][0])


def problem_prompt(source: str, backend: str = "triton", gpu: str | None = None, precision: str = "fp32",
                   device: str = "cuda") -> str:
    name, example = BACKENDS[backend]
    target = f"an {gpu}" if gpu else ("a CUDA GPU" if device == "cuda" else "a CUDA GPU (this run checks "
                                       "correctness on the CPU through Triton's interpreter)")
    how = 'pass input_precision="ieee" to tl.dot' if backend == "triton" else "no TF32 or half-precision MMA"
    ieee = (f"\n- fp32 means IEEE fp32 arithmetic: TF32 or lower-precision products inside the kernel fail the "
            f"check ({how})." if precision == "fp32" else "")
    return f"""You write custom {name} kernels to replace the PyTorch operators in the given architecture and \
make it faster on {target}. You may replace some or all operators, fuse them, or change the algorithm \
(for example an online softmax), as long as the output stays the same.

Here is an example. The given architecture:

{_EXAMPLE_MODEL}

An optimized architecture with a custom {name} kernel:

{example}

Your architecture to optimize:

```python
{source.strip()}
```

Rules:
- Name the optimized class `ModelNew`; its constructor takes the same arguments as `Model`'s, and its forward the \
same inputs, returning outputs of the same shapes and dtype.
- The computation must run in your custom {name} kernel(s); calling the PyTorch operator you replace earns nothing.
- Inputs and parameters arrive in {precision} (floating-point tensors cast to it; integer tensors unchanged). \
Outputs are checked against the reference on several random inputs, including broader input distributions, with \
scale-invariant error thresholds; every output element must be written.{ieee}
- Do not hard-code input values, cache results across calls, use extra threads or streams, or touch timers.

Reply with the complete new architecture in a single ```python code block and nothing else."""


def feedback_prompt(source: str, previous_reply_code: str | None, feedback: str, backend: str = "triton",
                    gpu: str | None = None, precision: str = "fp32", device: str = "cuda") -> str:
    base = problem_prompt(source, backend, gpu, precision, device)
    prev = f"\n\nYour previous answer:\n\n```python\n{previous_reply_code.strip()}\n```" if previous_reply_code else ""
    return f"{base}{prev}\n\nResult of evaluating it:\n{feedback}\n\nReply with an improved `ModelNew`."


def followup_prompt(feedback: str) -> str:
    """A later turn's user message when the chat history grows (``chat="history"``): only the feedback, since
    the problem and the previous answer are already in the conversation."""
    return f"Result of evaluating your previous answer:\n{feedback}\n\nReply with an improved `ModelNew`."


_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+.-]*)")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as ``(language tag, body)``, left to right: three backticks whose line ends (the tag is the
    tag-like start of the rest of that line), the body up to the next three backticks or the end of the text. The
    blocks the regex ``_FENCE_BEFORE`` (in the test) finds, in linear time: that regex tried every position of a
    line with no end, so 20,000 openings of a python block on one line (180 KB) took it 15 s."""
    blocks, pos = [], 0
    while (start := text.find("```", pos)) >= 0:
        line_end = text.find("\n", start + 3)
        if line_end < 0:  # no opening line ends after this one, so none after a later one either
            break
        lang = _LANG.match(text, start + 3, line_end).group(1)
        end = text.find("```", line_end + 1)
        blocks.append((lang, text[line_end + 1:end if end >= 0 else len(text)]))
        if end < 0:
            break
        pos = end + 3
    return blocks


def _without_thinking(text: str) -> str:
    """``text`` less every ``<think>...</think>`` span (each opening to the first closing after it), in linear time:
    ``re.sub(r"<think>.*?</think>")`` scanned to the end once per unclosed opening, so a reply of 16,000 ``<think>``
    tags (112 KB, a degenerate sample at a 32k-token cap) took 9 s, quadratic in its length."""
    kept, pos = [], 0
    while (start := text.find("<think>", pos)) >= 0:
        end = text.find("</think>", start + len("<think>"))
        if end < 0:  # no closing after this opening, so none after any later one either
            break
        kept.append(text[pos:start])
        pos = end + len("</think>")
    kept.append(text[pos:])
    return "".join(kept)


def extract_code(reply: str) -> str | None:
    """The candidate's source from a model reply, or None.

    Takes the last fenced block that defines ``class ModelNew`` (models often restate the input first and put
    the answer last), preferring ``python``-tagged blocks; a reply with no fences but a ``class ModelNew`` is
    taken whole from its first import; a ``<think>...</think>`` preamble is ignored.
    """
    if not isinstance(reply, str):
        return None
    text = _without_thinking(reply)
    blocks = [(lang.lower(), body) for lang, body in _fenced_blocks(text)]
    with_model = [(lang, b) for lang, b in blocks if re.search(r"class\s+ModelNew\b", b)]
    if with_model:
        py = [b for lang, b in with_model if lang in ("python", "py", "python3", "")]
        return (py or [b for _, b in with_model])[-1].strip() + "\n"
    if not blocks and re.search(r"class\s+ModelNew\b", text):
        m = re.search(r"^(?:import|from)\s", text, re.M)
        return text[m.start() if m else 0:].strip() + "\n"
    return None

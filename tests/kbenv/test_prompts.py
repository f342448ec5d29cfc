from kbenv.prompts import extract_code, problem_prompt

CODE = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_extract_last_block_with_modelnew():
    reply = f"Here is the input:\n```python\nclass Model: pass\n```\nAnswer:\n```python\n{CODE}```\nDone."
    assert extract_code(reply) == CODE


def test_extract_variants():
    assert extract_code(f"```py\n{CODE}```") == CODE
    assert extract_code(f"<think>```python\nclass ModelNew: wrong\n```</think>\n```python\n{CODE}```") == CODE
    assert extract_code(f"Sure!\n{CODE}") == CODE
    assert extract_code(f"```python\n{CODE}") == CODE  # unterminated fence (truncated reply)
    assert extract_code("no code here") is None
    assert extract_code("```python\nprint(1)\n```") is None
    assert extract_code(None) is None


def test_prompt_names_backend_gpu_and_precision():
    p = problem_prompt("class Model: pass", backend="cuda", gpu="NVIDIA H200", precision="bf16")
    assert "CUDA" in p and "NVIDIA H200" in p and "bf16" in p and "class Model: pass" in p


def test_an_fp32_prompt_says_fp32_is_ieee_and_how():
    # the fp32 contract (rewards/precision.py): an honest policy must know TF32 fails
    assert 'input_precision="ieee"' in problem_prompt("class Model: pass", precision="fp32")
    assert "no TF32" in problem_prompt("class Model: pass", backend="cuda", precision="fp32")
    assert "IEEE" not in problem_prompt("class Model: pass", precision="bf16")


def _within(seconds: float):
    """A guard for the inputs that were quadratic: SIGALRM ends the test if the scan takes more than ``seconds``
    (linear, each takes milliseconds; the old regexes took about 25 minutes), so a regression fails instead of
    stalling CI."""
    import contextlib
    import signal

    def _expired(signum, frame):
        raise TimeoutError(f"took more than {seconds} s: the scan is not linear")

    @contextlib.contextmanager
    def guard():
        old = signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return guard()


def test_thinking_spans_go_as_the_regex_took_them_but_in_linear_time():
    """Each ``<think>`` to the first ``</think>`` after it is removed, as ``re.sub(r"<think>.*?</think>")`` did; that
    regex scanned to the end once per unclosed opening, so 200,000 of them (1.4 MB, a degenerate sample) would have
    taken it about 25 minutes."""
    import random
    import re

    from kbenv.prompts import _without_thinking
    rng = random.Random(0)
    parts = ["<think>", "</think>", "<think", "think>", "</", "a", "\n"]
    for _ in range(5000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 24)))
        assert _without_thinking(text) == re.sub(r"<think>.*?</think>", "", text, flags=re.S), text
    with _within(30):
        assert extract_code("<think>" * 200_000 + f"```python\n{CODE}```") == CODE


_FENCE_BEFORE = r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)"  # what extract_code matched blocks with


def test_fenced_blocks_are_the_regexs_but_found_in_linear_time():
    """The blocks ``_FENCE_BEFORE`` finds, on random texts of fences, backticks, newlines and tags; that regex tried
    every position of a line with no end, so 200,000 openings on one line (1.8 MB) would have taken it ~25 minutes."""
    import random
    import re

    from kbenv.prompts import _fenced_blocks
    rng = random.Random(1)
    parts = ["```", "`", "``", "\n", " ", "\t", "python", "py", "x", "class ModelNew", "c++"]
    for _ in range(5000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 20)))
        assert _fenced_blocks(text) == re.findall(_FENCE_BEFORE, text, re.S), text
    with _within(30):
        assert extract_code("```python" * 200_000) is None
        assert extract_code(f"```python\n{CODE}```" + "```python" * 200_000) == CODE

"""A policy that runs a chat model in this process with Hugging Face transformers (the optional ``hf`` extra)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .base import Observation, Policy, chat_messages


class TransformersPolicy(Policy):
    """Reply by ``model.generate`` on a local chat model, formatting each observation with its chat template.

    transformers (and torch) are imported when the policy is built, not when :mod:`kbenv.agents` is imported;
    without transformers the constructor raises :class:`ImportError` naming the extra to install.

    :meth:`act_batch` generates ``batch_size`` observations at a time, left-padded, sequentially (no threads:
    the model is one device resource). Temperature 0 is greedy decoding; a positive temperature samples.

    Args:
        model_name_or_path: a Hub id or a local folder, passed to ``from_pretrained``.
        device: ``"auto"`` (CUDA when available, else CPU), or any torch device string. Pass
            ``model_kwargs={"device_map": ...}`` instead to shard a large model (needs ``accelerate``).
        dtype: ``"auto"`` (the checkpoint's dtype), or a torch dtype or its name (``"bfloat16"``).
        max_new_tokens: most tokens generated per reply.
        temperature: 0 for greedy decoding; otherwise the sampling temperature.
        batch_size: observations per ``generate`` call.
        top_p: nucleus sampling mass (used only when sampling).
        seed: seeds torch's generator before each batch when sampling, for repeatable samples.
        model_kwargs: extra keyword arguments for ``AutoModelForCausalLM.from_pretrained``.
    """

    def __init__(
        self,
        model_name_or_path: str,
        device: str = "auto",
        dtype: Any = "auto",
        max_new_tokens: int = 4096,
        temperature: float = 0.0,
        batch_size: int = 8,
        top_p: float = 1.0,
        seed: int | None = None,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ImportError(
                "TransformersPolicy needs transformers, an optional dependency of kbenv: "
                "pip install 'kbenv[hf]' (or pip install transformers)"
            ) from exc
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._torch = torch
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.batch_size = batch_size
        self.top_p = top_p
        self.seed = seed

        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_name_or_path)
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError(f"{model_name_or_path} has no chat template; TransformersPolicy needs a chat model")
        # Decoder-only batches are padded on the left so every prompt ends where generation starts.
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

        kwargs = dict(model_kwargs or {})
        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype)
        # transformers 4.56 renamed from_pretrained's torch_dtype to dtype.
        kwargs.setdefault("dtype" if _version_at_least(transformers.__version__, (4, 56)) else "torch_dtype", dtype)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model_name_or_path, **kwargs)
        if "device_map" not in kwargs:
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.model.to(device)
        self.model.eval()

    def act(self, observation: Observation) -> str:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[Observation]) -> list[str]:
        observations = list(observations)
        replies: list[str] = []
        for start in range(0, len(observations), self.batch_size):
            batch = observations[start : start + self.batch_size]
            replies.extend(self._generate([self._prompt_text(observation) for observation in batch]))
        return replies

    def _prompt_text(self, observation: Observation) -> str:
        messages = chat_messages(observation)
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception:
            # Some templates (e.g. early Gemma) reject a system role; fold it into the user turn instead.
            if len(messages) == 1:
                raise
            merged = [{"role": "user", "content": messages[0]["content"] + "\n\n" + messages[1]["content"]}]
            return self.tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)

    def _generate(self, prompts: list[str]) -> list[str]:
        torch = self._torch
        # The chat template already holds the special tokens (BOS and the like).
        inputs = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        inputs = {name: tensor.to(self.model.device) for name, tensor in inputs.items()}
        sampling = self.temperature > 0
        options: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sampling,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if sampling:
            options.update(temperature=self.temperature, top_p=self.top_p)
            if self.seed is not None:
                torch.manual_seed(self.seed)
        with torch.inference_mode():
            output_ids = self.model.generate(**inputs, **options)
        prompt_length = inputs["input_ids"].shape[1]
        return self.tokenizer.batch_decode(output_ids[:, prompt_length:], skip_special_tokens=True)


def _version_at_least(version: str, minimum: tuple[int, int]) -> bool:
    match = re.match(r"(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= minimum

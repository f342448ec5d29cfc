"""TransformersPolicy against a stand-in ``transformers`` module (the real one is an optional extra)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from kbenv.agents import TransformersPolicy

PAD = 0


class FakeTokenizer:
    """Characters as token ids; a chat template that writes ``<role>content`` and ends with ``<assistant>``."""

    reject_system = False

    def __init__(self) -> None:
        self.chat_template = "{{ messages }}"
        self.pad_token = None
        self.eos_token = "\x01"
        self.padding_side = "right"
        self.prompts: list[str] = []

    @property
    def pad_token_id(self) -> int:
        return ord(self.pad_token)

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        if self.reject_system and messages[0]["role"] == "system":
            raise ValueError("System role not supported")
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, texts, return_tensors, padding, add_special_tokens):
        assert return_tensors == "pt" and padding is True and add_special_tokens is False
        self.prompts.extend(texts)
        width = max(len(t) for t in texts)
        rows, masks = [], []
        for text in texts:
            ids, pad = [ord(c) for c in text], [self.pad_token_id] * (width - len(text))
            ones, zeros = [1] * len(ids), [0] * len(pad)
            rows.append(pad + ids if self.padding_side == "left" else ids + pad)
            masks.append(zeros + ones if self.padding_side == "left" else ones + zeros)
        return {"input_ids": torch.tensor(rows), "attention_mask": torch.tensor(masks)}

    def batch_decode(self, ids, skip_special_tokens):
        assert skip_special_tokens is True
        return ["".join(chr(i) for i in row if i != self.pad_token_id) for row in ids.tolist()]


class FakeModel:
    """Generates ``"reply to <prompt length>"`` for each row, right-padded to a common length."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.calls: list[dict] = []
        self.moved_to = None

    def to(self, device):
        self.moved_to = device
        return self

    def eval(self):
        return self

    def generate(self, input_ids, attention_mask, **options):
        self.calls.append({"batch": input_ids.shape[0], **options})
        replies = [f"reply to {int(mask.sum())}" for mask in attention_mask]
        width = max(len(r) for r in replies)
        new = torch.tensor([[ord(c) for c in r] + [options["pad_token_id"]] * (width - len(r)) for r in replies])
        return torch.cat([input_ids, new], dim=1)


@pytest.fixture
def fake_transformers(monkeypatch):
    module = types.ModuleType("transformers")
    module.__version__ = "4.57.1"
    module.loaded = {}

    def tokenizer_from_pretrained(name):
        module.loaded["tokenizer"] = name
        module.tokenizer = FakeTokenizer()
        return module.tokenizer

    def model_from_pretrained(name, **kwargs):
        module.loaded["model"] = (name, kwargs)
        module.model = FakeModel()
        return module.model

    module.AutoTokenizer = types.SimpleNamespace(from_pretrained=tokenizer_from_pretrained)
    module.AutoModelForCausalLM = types.SimpleNamespace(from_pretrained=model_from_pretrained)
    monkeypatch.setitem(sys.modules, "transformers", module)
    return module


def obs(prompt: str, system: str = "sys") -> dict:
    return {"prompt": prompt, "system": system, "problem_id": "kernelbench/level1/1", "turn": 0, "feedback": ""}


def prompt_length(prompt: str, system: str = "sys") -> int:
    return len(f"<system>{system}<user>{prompt}<assistant>")


def test_batches_left_padded_and_decodes_only_new_tokens(fake_transformers):
    policy = TransformersPolicy("org/model", device="cpu", batch_size=2)
    prompts = ["a", "a much longer prompt", "mid-size"]
    replies = policy.act_batch([obs(p) for p in prompts])
    assert replies == [f"reply to {prompt_length(p)}" for p in prompts]
    assert [call["batch"] for call in fake_transformers.model.calls] == [2, 1]
    assert fake_transformers.tokenizer.padding_side == "left"
    assert fake_transformers.tokenizer.pad_token == fake_transformers.tokenizer.eos_token
    assert fake_transformers.tokenizer.prompts[0] == "<system>sys<user>a<assistant>"
    assert fake_transformers.model.moved_to == "cpu"
    assert policy.act(obs("one")) == f"reply to {prompt_length('one')}"


def test_greedy_by_default_and_sampling_with_temperature(fake_transformers):
    TransformersPolicy("m", device="cpu", max_new_tokens=77).act(obs("x"))
    greedy = fake_transformers.model.calls[0]
    assert greedy["do_sample"] is False and greedy["max_new_tokens"] == 77 and "temperature" not in greedy
    TransformersPolicy("m", device="cpu", temperature=0.7, top_p=0.95).act(obs("x"))
    sampled = fake_transformers.model.calls[0]
    assert sampled["do_sample"] is True and sampled["temperature"] == 0.7 and sampled["top_p"] == 0.95


def test_dtype_keyword_follows_the_transformers_version(fake_transformers):
    TransformersPolicy("m", device="cpu", dtype="bfloat16")
    assert fake_transformers.loaded["model"] == ("m", {"dtype": torch.bfloat16})
    fake_transformers.__version__ = "4.45.2"
    TransformersPolicy("m", device="cpu")
    assert fake_transformers.loaded["model"] == ("m", {"torch_dtype": "auto"})


def test_device_map_leaves_placement_to_transformers(fake_transformers):
    TransformersPolicy("m", model_kwargs={"device_map": "auto"})
    assert fake_transformers.loaded["model"][1]["device_map"] == "auto"
    assert fake_transformers.model.moved_to is None


def test_system_role_folded_into_user_when_template_rejects_it(fake_transformers, monkeypatch):
    monkeypatch.setattr(FakeTokenizer, "reject_system", True)
    policy = TransformersPolicy("m", device="cpu")
    policy.act(obs("prompt", system="be fast"))
    assert fake_transformers.tokenizer.prompts == ["<user>be fast\n\nprompt<assistant>"]


def test_model_without_chat_template_is_refused(fake_transformers, monkeypatch):
    monkeypatch.setattr(FakeTokenizer, "__init__", lambda self: setattr(self, "chat_template", None))
    with pytest.raises(ValueError, match="no chat template"):
        TransformersPolicy("base-model", device="cpu")


def test_missing_transformers_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    with pytest.raises(ImportError, match=r"kbenv\[hf\]"):
        TransformersPolicy("org/model")

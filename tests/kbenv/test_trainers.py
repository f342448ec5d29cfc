"""The trainers people use, end to end on the CPU: a real TRL GRPOTrainer step on kbenv's reward, and a
verifiers environment whose rubric calls kbenv, rolled out by verifiers against a loopback model server.

CI installs both (requirements-cpu.txt pins them). Elsewhere a missing extra skips these tests; under CI
(``CI`` set) it fails them, so the integration cannot silently stop being tested.
"""

from __future__ import annotations

import importlib
import os
import tempfile

import pytest

from kbenv.agents.scripted import KnownGoodPolicy

PID = "kernelbench/level1/19"
GOOD = KnownGoodPolicy().act({"problem_id": PID})
BAD = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 0\n```"
PROSE = "I would rather not write a kernel today."


def need(module: str):
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the trainer extra {module!r} is not installed")


def tiny_model_and_tokenizer(replies: list[str]):
    """A randomly initialised one-layer Llama and a tokenizer built here (no download).

    The vocabulary is lowercase letters (for prompts) plus one token per whole reply, and the output layer is
    zeroed: every token is equally likely, so sampling one token draws one of ``replies`` (the others are
    suppressed at generation).
    """
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "?": 3}
    for c in "abcdefghijklmnopqrstuvwxyz ":
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_tokens([AddedToken(r, normalized=False) for r in replies])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0,
                         eos_token_id=1, bos_token_id=2)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model, tokenizer, [tokenizer.convert_tokens_to_ids(r) for r in replies]


def test_a_trl_grpo_step_learns_from_kbenv_rewards(pool):
    need("trl")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    import kbenv

    model, tokenizer, reply_ids = tiny_model_and_tokenizer([GOOD, BAD, PROSE])
    dataset = Dataset.from_dict({"prompt": ["write a relu kernel"] * 2, "problem_id": [PID] * 2})
    results = []
    reward = kbenv.trl_reward_func(pool=pool, on_results=results.extend)
    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=1, max_steps=1, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", learning_rate=1e-2, dataloader_num_workers=0, seed=0,
                      generation_kwargs={"suppress_tokens": [i for i in range(len(tokenizer)) if i not in reply_ids]})
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tokenizer)
    before = model.lm_head.weight.detach().clone()
    trainer.train()
    log = trainer.state.log_history[0]
    verdicts = sorted((r.verdict, r.category or "") for r in results)
    assert len(results) == 4 and ("pass", "") in verdicts and any(v == "fail" for v, _ in verdicts), verdicts
    assert all(r.problem == PID for r in results)
    assert log["rewards/kbenv_reward/mean"] == pytest.approx(sum(r.reward for r in results) / 4)
    assert log["reward_std"] > 0  # the group's rewards differ, so the step has an advantage to follow
    assert not torch.equal(before, model.lm_head.weight)  # and the optimiser moved the model

"""Policies for kbenv: LLM clients and scripted policies, each behind the small :class:`Policy` interface.

Importing this package is light: no torch and no transformers (``TransformersPolicy`` imports them when built).
kbenv's CLI and rollout runner resolve policies by ``"kbenv.agents:ClassName"`` strings at run time.
"""

from .base import Observation, Policy, PolicyError, chat_messages
from .hf_local import TransformersPolicy
from .openai_chat import OpenAIChatPolicy
from .scripted import (
    EchoPolicy,
    KnownBadCase,
    KnownBadPolicy,
    KnownGoodPolicy,
    MissingSolutionError,
    known_bad_suite,
    parse_expectations,
)

__all__ = [
    "EchoPolicy",
    "KnownBadCase",
    "KnownBadPolicy",
    "KnownGoodPolicy",
    "MissingSolutionError",
    "Observation",
    "OpenAIChatPolicy",
    "Policy",
    "PolicyError",
    "TransformersPolicy",
    "chat_messages",
    "known_bad_suite",
    "parse_expectations",
]

"""The model behind the server: a small `Engine` protocol and its transformers implementation.

The HTTP layer only needs to encode, decode, render a chat and step a decoding one token at a time; keeping
that behind a protocol lets the tests serve a fake model in milliseconds and keeps torch out of the app module.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from components.errors import VcpilotError

if TYPE_CHECKING:
    import torch

__all__ = [
    "GREEDY_BELOW",
    "Decoding",
    "Engine",
    "ModelLoadError",
    "Sampling",
    "TransformersEngine",
    "load_engine",
    "plain_chat",
]

# Below this temperature decoding is greedy (vLLM's bound): logits divided by 1e-300 overflow to inf, and a
# softmax of inf is NaN, which no token can be sampled from.
GREEDY_BELOW = 1e-5


class ModelLoadError(VcpilotError):
    """The model directory cannot be served; the message says why in one sentence."""


@dataclass(frozen=True)
class Sampling:
    """How to pick each next token: greedy when temperature is (nearly) 0, else sampled (seeded when seed is set)."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        """Whether each next token is the likeliest one."""
        return self.temperature < GREEDY_BELOW


class Decoding(Protocol):
    """One request's generation in progress."""

    def step(self) -> int | None:
        """Run one forward pass and return the next token id, or None at the end of the sequence."""
        ...


class Engine(Protocol):
    """What the server needs from a model."""

    context_length: int

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, as the model sees a prompt."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated token ids, special tokens dropped."""
        ...

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt for a conversation, ready for the assistant's answer; ValueError if the model refuses it."""
        ...

    def start(self, prompt_ids: Sequence[int], sampling: Sampling) -> Decoding:
        """Begin generating after `prompt_ids`; nothing runs until the first `step`."""
        ...


def plain_chat(messages: Sequence[dict[str, str]]) -> str:
    """The chat prompt for a model without a chat template: `role: content` lines, then `assistant:`."""
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


def chat_prompt(tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """The prompt for the answer after `messages`: the tokenizer's chat template when it has one, else `plain_chat`.

    What `serve` sends the model for a chat request, and so what fine-tuning and evaluation render a conversation
    as; ValueError when the template refuses the messages.
    """
    if getattr(tokenizer, "chat_template", None):
        from jinja2 import TemplateError

        try:
            prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        except TemplateError as err:  # the template's raise_exception: "roles must alternate", "no system role"
            raise ValueError(f"The model's chat template refuses these messages ({err})") from None
        return str(prompt)
    return plain_chat(messages)


class _TransformersDecoding:
    """Greedy or sampled decoding with a KV cache: the prompt once, then one new token per step."""

    def __init__(self, engine: TransformersEngine, prompt_ids: Sequence[int], sampling: Sampling):
        import torch

        self._engine = engine
        self._sampling = sampling
        self._next_input = torch.tensor([list(prompt_ids)], device=engine.device)
        self._past: Any = None
        self._generated = 0
        self._generator: torch.Generator | None = None
        if not sampling.greedy and sampling.seed is not None:
            self._generator = torch.Generator(device=engine.device).manual_seed(sampling.seed)

    def step(self) -> int | None:
        import torch

        if self._generated >= self._sampling.max_tokens:
            return None
        cache = self._engine.cache_argument
        with torch.inference_mode():
            out = self._engine.model(input_ids=self._next_input, use_cache=True, **{cache: self._past})
            self._past = getattr(out, cache)
            token = self._pick(out.logits[0, -1].float())
        if token in self._engine.eos_ids:
            self._generated = self._sampling.max_tokens
            return None
        self._generated += 1
        self._next_input = torch.tensor([[token]], device=self._engine.device)
        return token

    def _pick(self, logits: torch.Tensor) -> int:
        import torch

        if self._sampling.greedy:
            return int(logits.argmax())
        probs = torch.softmax(logits / self._sampling.temperature, dim=-1)
        if self._sampling.top_p < 1.0:
            ordered, order = probs.sort(descending=True)
            # Keep the smallest set of tokens whose mass reaches top_p (always at least the likeliest one).
            outside = ordered.cumsum(-1) - ordered >= self._sampling.top_p
            probs = torch.zeros_like(probs).scatter(0, order, ordered.masked_fill(outside, 0.0))
        return int(torch.multinomial(probs, 1, generator=self._generator))


class TransformersEngine:
    """Any Hugging Face causal LM directory (our tiny char model included), on the GPU when there is one."""

    def __init__(self, model: Any, tokenizer: Any, device: str):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        config = model.config
        self.context_length = int(getattr(config, "max_position_embeddings", 0) or tokenizer.model_max_length)
        eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = frozenset(eos if isinstance(eos, list) else [] if eos is None else [eos])
        # transformers 5 renamed `past_key_values` to `cache`; models with older forward signatures keep the old name.
        forward = inspect.signature(model.forward).parameters
        self.cache_argument = "cache" if "cache" in forward else "past_key_values"

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with the tokenizer's usual special tokens (a BOS for Llama, none for ours)."""
        ids = list(self.tokenizer(text).input_ids)
        if not ids and self.tokenizer.bos_token_id is not None:
            ids = [self.tokenizer.bos_token_id]  # an empty prompt still needs one position to predict from
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated ids; our tiny tokenizer must not insert spaces between characters."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False))

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The model's own chat template when it has one, else `plain_chat`."""
        return chat_prompt(self.tokenizer, messages)

    def start(self, prompt_ids: Sequence[int], sampling: Sampling) -> Decoding:
        """A new decoding of this model."""
        return _TransformersDecoding(self, prompt_ids, sampling)


def load_engine(path: str | Path, device: str | None = None) -> TransformersEngine:
    """Load a model directory for serving, or raise ModelLoadError saying what is wrong with it."""
    directory = Path(path)
    if not directory.is_dir():
        what = "is a file, not a model directory" if directory.exists() else "does not exist"
        raise ModelLoadError(f"model directory {directory} {what}: give the directory that holds config.json")
    if not (directory / "config.json").is_file():
        raise ModelLoadError(f"{directory} is not a Hugging Face model directory (it holds no config.json)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model: Any = AutoModelForCausalLM.from_pretrained(directory, dtype="auto")
        model = model.to(device)
    except (OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"cannot load the model in {directory}: {reason}") from None
    model.eval()
    return TransformersEngine(model, tokenizer, device)

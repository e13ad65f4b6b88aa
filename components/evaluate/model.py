"""A model directory as the `LanguageModel` scoring needs: greedy completions and reference likelihoods.

Any Hugging Face causal LM directory works (the demo's tiny char-level model is one); it runs on the GPU when
the evaluate pod has one, on the CPU otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from components.errors import VcpilotError
from components.serving.engine import chat_prompt

__all__ = ["CausalLM", "ModelDirError", "quiet_progress"]


# A ValueError too: `CausalLM.load` callers and the evaluation's checks catch a bad model directory as a bad value.
class ModelDirError(VcpilotError, ValueError):
    """The directory does not hold a model we can load; the message says why in one sentence."""


class CausalLM:
    """A loaded causal LM and its tokenizer, answering greedily."""

    def __init__(self, model: Any, tokenizer: Any, device: str = "cpu") -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        # the most positions the model has: past them a model with learned positions fails, and none is trained
        self.context: int | None = getattr(getattr(model, "config", None), "max_position_embeddings", None)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> CausalLM:
        """Load `path` (a Hugging Face model directory); ModelDirError when it is missing or not a model."""
        directory = Path(path)
        if not directory.is_dir():
            raise ModelDirError(f"the model directory {directory} does not exist")
        if not (directory / "config.json").is_file():
            raise ModelDirError(f"{directory} is not a Hugging Face model directory: it has no config.json")
        from transformers import AutoModelForCausalLM, AutoTokenizer  # imported here: transformers is slow to import

        try:
            tokenizer = AutoTokenizer.from_pretrained(directory)
            model = AutoModelForCausalLM.from_pretrained(directory)
        except (OSError, ValueError, KeyError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ModelDirError(f"cannot load the model in {directory}: {first}") from None
        return cls(model, tokenizer, device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def _ids(self, text: str, *, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special).input_ids)

    def _prompt_ids(self, prompt: str, room: int) -> list[int]:
        """The prompt's ids, its start cut so that `room` more tokens fit the context (one token at least).

        An empty prompt is the BOS token (else EOS), as `vcpilot serve` has it: there must be a position to
        predict the first token from.
        """
        ids = self._ids(prompt, special=True)
        if not ids:
            ids = [t for t in (self.tokenizer.bos_token_id, self.tokenizer.eos_token_id) if t is not None][:1]
        return ids[-max(self.context - room, 1) :] if self.context else ids

    def chat_prompt(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt for the answer after `messages`, as `vcpilot serve` renders a chat request to this model."""
        return chat_prompt(self.tokenizer, messages)

    def token_count(self, text: str) -> int:
        """How many tokens `text` takes."""
        return len(self._ids(text, special=False))

    @torch.inference_mode()
    def complete(self, prompt: str, max_new_tokens: int) -> str:
        """Greedy completion of `prompt`, stopped at the end-of-sequence token or after `max_new_tokens`.

        Within the model's context: a long prompt loses its start.
        """
        if self.context:
            max_new_tokens = min(max_new_tokens, self.context - 1)
        ids = torch.tensor([self._prompt_ids(prompt, max_new_tokens)], device=self.device)
        out = self.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
        )
        return str(self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))

    @torch.inference_mode()
    def completion_nll(self, prompt: str, completion: str) -> tuple[float, int]:
        """Summed negative log-likelihood of `completion`'s tokens after `prompt`, and how many there are.

        Prompt and completion are tokenized apart and joined, as training on prompt/completion pairs does, so
        the completion's tokens are exactly the ones scored. Past the model's context, the prompt loses its start
        and the completion its end, as training cuts a sequence.
        """
        completion_ids = self._ids(completion, special=False)
        if not completion_ids:
            return 0.0, 0
        if self.context:
            completion_ids = completion_ids[: self.context - 1]
        prompt_ids = self._prompt_ids(prompt, len(completion_ids))
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        logprobs = torch.log_softmax(self.model(ids).logits[0, :-1].float(), dim=-1)
        targets = ids[0, 1:]
        first = max(len(prompt_ids) - 1, 0)  # logits at position i predict token i + 1
        picked = logprobs[first:].gather(1, targets[first:, None])
        return float(-picked.sum()), int(picked.shape[0])


def quiet_progress() -> None:
    """No progress bars from transformers' weight loading (nor MLflow's output): logs and terminals stay readable."""
    from components.tracking.adapter import quiet

    quiet()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

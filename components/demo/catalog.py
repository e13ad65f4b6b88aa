"""The demo's task and its drift: a shop's price list before and after some prices changed and items were added.

The task is small enough for the tiny char-level model to learn on a CPU: the prompt asks the price of an item
("Q: price of red mug?" on one line, "A:" on the next) and the answer is " $12". The baseline catalog is what the
champion was trained on; the current catalog changes the price of a share of the items and adds new ones, so the
champion answers those wrongly — the drift the pipeline must detect and fix.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Catalog", "CatalogConfig", "Drift", "Item", "build_drift", "completion_for", "prompt_for"]

# Item names are "<adjective> <noun>": 10 x 12 = 120 names, all short enough for prompts of at most 30 characters.
_ADJECTIVES = ("red", "blue", "green", "black", "white", "small", "large", "wool", "steel", "oak")
_NOUNS = ("mug", "lamp", "chair", "scarf", "kettle", "towel", "pen", "bag", "clock", "plate", "bowl", "candle")
_MIN_PRICE, _MAX_PRICE = 2, 99


def prompt_for(name: str) -> str:
    """The question a user asks about an item."""
    return f"Q: price of {name}?\nA:"


def completion_for(price: int) -> str:
    """The right answer for a price (the leading space keeps the completion a separate word)."""
    return f" ${price}"


class Item(BaseModel):
    """One article of the shop: a stable SKU (what the service logs name), a name (what users ask) and a price."""

    model_config = ConfigDict(frozen=True)

    sku: str
    name: str
    price: int = Field(ge=_MIN_PRICE, le=_MAX_PRICE)

    @property
    def category(self) -> str:
        """The kind of article, the last word of its name (`red mug` is a mug): what the service files requests by."""
        return self.name.split()[-1]

    @property
    def prompt(self) -> str:
        """The question about this item."""
        return prompt_for(self.name)

    @property
    def completion(self) -> str:
        """The right answer to it."""
        return completion_for(self.price)


class Catalog(BaseModel):
    """The shop's price list at one time."""

    model_config = ConfigDict(frozen=True)

    items: tuple[Item, ...]

    def by_name(self) -> dict[str, Item]:
        """Items by name."""
        return {item.name: item for item in self.items}


class CatalogConfig(BaseModel):
    """How big the shop is and how much of it drifts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    items: int = Field(default=48, ge=4, le=100, description="Items in the baseline catalog")
    changed_share: float = Field(default=0.5, ge=0.0, le=1.0, description="Share of them whose price changes")
    new_items: int = Field(default=12, ge=0, le=20, description="Items added in the current catalog")


class Drift(BaseModel):
    """The baseline catalog, the current one, and what changed between them."""

    model_config = ConfigDict(frozen=True)

    baseline: Catalog
    current: Catalog
    changed: tuple[str, ...] = Field(description="Names of baseline items whose price changed")
    new: tuple[str, ...] = Field(description="Names of items that only the current catalog has")

    @property
    def drifted(self) -> tuple[str, ...]:
        """Every name whose right answer the champion does not know: changed and new items."""
        return self.changed + self.new

    def champion_answer(self, name: str) -> str:
        """What a model trained on the baseline answers: its old price, or for an unknown item a sibling's price.

        A model that never saw an item still answers, usually with the price of an item that looks alike (same
        noun) — so the wrong answers in the logs are plausible, not noise.
        """
        known = self.baseline.by_name()
        if name in known:
            return known[name].completion
        noun = name.split()[-1]
        siblings = [item for item in self.baseline.items if item.name.split()[-1] == noun]
        guess = siblings[0].price if siblings else self.baseline.items[0].price
        right = self.current.by_name()[name].price
        return completion_for(guess if guess != right else _other_price(guess))


def _other_price(price: int) -> int:
    return price + 1 if price < _MAX_PRICE else price - 1


def build_drift(config: CatalogConfig, seed: int) -> Drift:
    """The baseline and current catalogs drawn from `seed`: the same seed gives the same shop."""
    rng = random.Random(f"{seed}:catalog")
    names = [f"{adjective} {noun}" for adjective in _ADJECTIVES for noun in _NOUNS]
    rng.shuffle(names)
    baseline_names, new_names = names[: config.items], names[config.items : config.items + config.new_items]
    baseline = [
        Item(sku=f"SKU-{1000 + i}", name=name, price=rng.randint(_MIN_PRICE, _MAX_PRICE))
        for i, name in enumerate(baseline_names)
    ]
    changed = set(rng.sample(baseline_names, round(config.items * config.changed_share)))
    current = []
    for item in baseline:
        if item.name in changed:
            # Prices move by a visible amount, never back onto the old answer.
            price = rng.choice([p for p in range(_MIN_PRICE, _MAX_PRICE + 1) if abs(p - item.price) >= 3])
            item = item.model_copy(update={"price": price})
        current.append(item)
    current += [
        Item(sku=f"SKU-{1000 + config.items + i}", name=name, price=rng.randint(_MIN_PRICE, _MAX_PRICE))
        for i, name in enumerate(new_names)
    ]
    return Drift(
        baseline=Catalog(items=tuple(baseline)),
        current=Catalog(items=tuple(current)),
        changed=tuple(name for name in baseline_names if name in changed),
        new=tuple(new_names),
    )

"""Templates that differ only where a word-valued variable sits are one event; a short enumeration stays apart."""

from __future__ import annotations

from components.logs.merging import merge_templates


def test_a_position_with_many_words_is_a_variable_and_its_templates_join() -> None:
    users = ["admin", "oracle", "test", "guest", "pi", "ubuntu"]
    templates = {i: ["Invalid", "user", name, "from", "<*>"] for i, name in enumerate(users)}
    joins = merge_templates(templates, min_values=6)
    assert set(joins.values()) == {0}


def test_a_short_enumeration_stays_apart() -> None:
    templates = {1: ["Failed", "password", "for", "<*>"], 2: ["Failed", "none", "for", "<*>"]}
    assert merge_templates(templates, min_values=6) == {1: 1, 2: 2}


def test_a_wildcard_already_there_takes_the_others_in() -> None:
    templates = {1: ["Accepted", "<*>", "for", "root"], 2: ["Accepted", "publickey", "for", "root"]}
    assert merge_templates(templates, min_values=6) == {1: 1, 2: 1}


def test_templates_of_another_length_or_with_too_few_constants_never_join() -> None:
    templates = {1: ["<*>", "up"], 2: ["<*>", "down"], 3: ["<*>", "<*>"], 4: ["link", "up", "now"]}
    assert merge_templates(templates, min_values=2) == {1: 1, 2: 2, 3: 3, 4: 4}

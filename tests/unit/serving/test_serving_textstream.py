"""Token ids to text deltas: stop sequences that span tokens, half characters, held-back text."""

from __future__ import annotations

from components.serving.textstream import TextStream


def chars(ids):
    return "".join(chr(i) for i in ids)


def run(text, stop=()):
    stream = TextStream(chars, stop)
    deltas = []
    for c in text:
        deltas.append(stream.push(ord(c)))
        if stream.stopped:
            break
    deltas.append(stream.finish())
    return deltas, stream


def test_without_stops_each_token_comes_out_at_once():
    deltas, stream = run("hello")
    assert deltas == ["h", "e", "l", "l", "o", ""] and stream.text == "hello" and stream.tokens == 5


def test_a_stop_sequence_across_tokens_is_held_back_then_cut():
    deltas, stream = run("ab\nuser: more", stop=["\nuser:"])
    assert "".join(deltas) == "ab" and stream.stopped and stream.text == "ab"
    assert deltas[:3] == ["a", "b", ""], "the newline waits: it may start the stop sequence"
    assert stream.tokens == 8, "generation ends at the token that completed the stop sequence"


def test_a_false_start_is_released_once_it_cannot_be_a_stop():
    deltas, stream = run("a\nb", stop=["\nuser:"])
    assert deltas == ["a", "", "\nb", ""] and not stream.stopped


def test_text_held_back_at_the_end_comes_out_in_finish():
    deltas, _ = run("xy\nus", stop=["\nuser:"])
    assert "".join(deltas) == "xy\nus" and deltas[-1] == "\nus"


def test_half_a_character_waits_for_the_rest_of_its_bytes():
    data = "é!".encode()

    def utf8(ids):
        return bytes(ids).decode("utf-8", errors="replace")

    stream = TextStream(utf8)
    assert [stream.push(b) for b in data] == ["", "é", "!"]

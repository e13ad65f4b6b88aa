"""Go's printing of values where Argo's output depends on it."""

from __future__ import annotations

import pytest

from pipelines.local.govalues import go_quote


@pytest.mark.parametrize(
    "text,quoted",
    [
        ('[{"a":"b"}]', '"[{\\"a\\":\\"b\\"}]"'),  # what Argo makes of {{workflow.failures}}
        ("null", '"null"'),
        ("back\\slash", '"back\\\\slash"'),
        ("tab\tnew\nline\a\v", '"tab\\tnew\\nline\\a\\v"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("é ü \u0085 \u2028 \U0001f600 \U000e0001", '"é ü \\u0085 \\u2028 \U0001f600 \\U000e0001"'),
    ],
)
def test_go_quote_is_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted

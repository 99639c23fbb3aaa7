"""YAML 1.2 core scalars (as the original's `yaml` package reads them), plain keys as text,
and a dumper whose strings both YAML versions read back."""

from __future__ import annotations

import datetime

import pytest
import yaml

from qmd.core.yamlcore import dumper, load


def test_scalars_read_as_yaml_1_2() -> None:
    got = load("a: yes\nb: no\nc: on\nd: 10:30\ne: 017\nf: 0o17\ng: 0x1F\nh: true\ni: FALSE\nj: 1e3\nk: .inf\nl: 2024-01-05\nm: ~\nn: 1_000\no: y\n")
    assert got == {"a": "yes", "b": "no", "c": "on", "d": "10:30", "e": 17, "f": 15, "g": 31, "h": True, "i": False,
                   "j": 1000.0, "k": float("inf"), "l": datetime.date(2024, 1, 5), "m": None, "n": "1_000", "o": "y"}


def test_plain_keys_are_their_text() -> None:
    assert load("08: a\n1e3: b\non: c\n2024: d\n~: e\nnested: {1: f}\n") == {"08": "a", "1e3": "b", "on": "c", "2024": "d", "~": "e", "nested": {"1": "f"}}


def test_explicit_tags() -> None:
    assert load("a: !!bool yes\nb: !!int 0b101\nc: !!str 5\nd: !!float 2\n") == {"a": True, "b": 5, "c": "5", "d": 2.0}
    for text in ("a: !!bool maybe", "a: !!int x1", "a: !!float abc"):
        with pytest.raises(yaml.YAMLError):
            load(text)


@pytest.mark.parametrize("text", ["yes", "no", "on", "off", "y", "n", "N", "10:30", "017", "1e3", "0o17", "0x1f", "true", ".5", "null", "~", "1_000", "2024-01-05"])
def test_strings_are_written_so_both_versions_read_them_back(text: str) -> None:
    out = yaml.dump({text: [text]}, Dumper=dumper())
    assert load(out) == {text: [text]}
    assert yaml.safe_load(out) == {text: [text]}  # YAML 1.1 (an older qmd, PyYAML)

"""The strict YAML loader: duplicate keys, alias bombs and non-UTF-8 files are refused."""

from __future__ import annotations

import re

import pytest

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.yaml_load import MAX_VALUES, expanded_size, load_yaml, load_yaml_file


def test_duplicate_keys_name_both_lines():
    text = "training:\n  lr: 0.002\n  batch_size: 64\n  lr: 5.0\n"
    with pytest.raises(
        BenchlibError, match=re.escape("x: the key 'lr' appears twice, at lines 2 and 4; keep one")
    ):
        load_yaml(text, "x")
    with pytest.raises(BenchlibError, match="the key 'fedavg' appears twice, at lines 1 and 2"):
        load_yaml("fedavg: {label: A}\nfedavg: {label: B}\n", "x")
    with pytest.raises(BenchlibError, match="the key 'label' appears twice, at line 2;"):
        load_yaml("methods:\n  local: {label: Local, label: L2}\n", "x")  # one flow mapping


def test_equal_keys_in_different_mappings_and_merge_overrides_are_fine():
    text = "a: &base {lr: 1, seed: 0}\nb: {lr: 2}\nc:\n  <<: *base\n  lr: 3\n"
    assert load_yaml(text, "x") == {
        "a": {"lr": 1, "seed": 0},
        "b": {"lr": 2},
        "c": {"lr": 3, "seed": 0},
    }


def test_an_alias_bomb_is_refused_before_it_is_walked():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
    )
    with pytest.raises(BenchlibError, match="expands to more than 1,000,000 values"):
        load_yaml(bomb, "x")
    with pytest.raises(BenchlibError, match="expands to more than"):
        load_yaml("a: &a [*a]\n", "x")  # a list that contains itself
    # aliases that reuse a value a few times are ordinary YAML
    assert load_yaml("a: &a [1, 2]\nb: *a\nc: *a\n", "x") == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def test_expanded_size_counts_every_value_once_per_use():
    import yaml

    node = yaml.compose("a: &a [1, 2]\nb: [*a, *a]\n")
    # mapping + 2 keys + list a (1 + 2) + list b (1 + 2 x 3)
    assert expanded_size(node) == 1 + 2 + 3 + 7
    assert expanded_size(node, limit=5) == 6
    assert MAX_VALUES == 1_000_000


def test_a_non_utf8_file_names_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(
        BenchlibError, match=re.escape(f"config file {path} is not UTF-8 text (line 2)")
    ):
        load_yaml_file(path, "config file")


def test_syntax_errors_name_the_line():
    with pytest.raises(BenchlibError, match="x is not valid YAML at line 2; fix its syntax"):
        load_yaml("a: 1\nb: c: d\n", "x")


def test_typed_scalars_reads_string_leaves_as_yaml_would():
    from benchlib.primitives.yaml_load import typed_scalars

    given = {
        "k": ["0", "1"],
        "lr": "0.5",
        "on": "true",
        "name": "fedavg",
        "none": "null",
        "q": "1a",
    }
    assert typed_scalars(given) == {
        "k": [0, 1], "lr": 0.5, "on": True, "name": "fedavg", "none": None, "q": "1a"
    }  # fmt: skip

"""Every dataset source declares its params: a typo, a wrong type or a missing required key is one
error naming the source and the key (before any data is read), and omitted keys get the declared
defaults, the values the build functions used to fall back to."""

from __future__ import annotations

import jsonschema
import pytest

from benchlib.data.registry import dataset_names, get_dataset
from benchlib.declarations.params import UNSET
from benchlib.primitives.errors import BenchlibError

TYPOS = [  # source, given params, the unknown key, the suggestion (None: no close match)
    ("hc18", {"szie": 32}, "szie", "size"),
    ("kidney_stones", {"veiw": "SUR"}, "veiw", "view"),
    ("fets", {"min_tumour_pixels": 2}, "min_tumour_pixels", "min_tumor_pixels"),
    ("pacs_local", {"path": "x", "image_szie": 32}, "image_szie", "image_size"),
    ("isic2019", {"images_sha": "0" * 64}, "images_sha", "images_sha256"),
    ("mnist", {"rgb_32": False}, "rgb_32", "rgb32"),
    ("chexmask_mimic", {"num_image": 4}, "num_image", "num_images"),
    ("camelyon17", {"zzz": 1}, "zzz", None),
]


@pytest.mark.parametrize(("source", "params", "key", "close"), TYPOS)
def test_unknown_key_names_the_source_the_key_and_a_close_match(source, params, key, close):
    with pytest.raises(BenchlibError) as error:
        get_dataset(source).resolve(params)
    message = str(error.value)
    assert message.count("\n") == 0
    assert f"source {source!r} params" in message and f"unknown parameter {key!r}" in message
    if close:
        assert f"did you mean {close!r}?" in message
    else:
        assert "did you mean" not in message
    assert "it takes: " in message


def test_a_typo_stops_prepare_before_any_data_is_read(tmp_path):
    with pytest.raises(BenchlibError, match=r"'szie' \(did you mean 'size'\?\)"):
        get_dataset("hc18").prepare(tmp_path / "store", {"path": str(tmp_path), "szie": 32})
    assert not (tmp_path / "store").exists()


WRONG_TYPES = [  # source, given params, the key the error names
    ("hc18", {"size": "64"}, "size"),
    ("hc18", {"size": 4}, "size"),  # below the range
    ("kidney_stones", {"view": "TOP"}, "view"),  # not in the enum
    ("kidney_stones", {"whiten": "yes"}, "whiten"),
    ("fets", {"modalities": ["flair", "dwi"]}, "modalities"),
    ("fets", {"test": 1.0}, "test"),
    ("pacs", {"clients_per_domain": 0}, "clients_per_domain"),
    ("mnist", {"rgb32": 1}, "rgb32"),
    ("tpt48_local", {"path": 3}, "path"),
    ("camelyon17", {"retries": -1}, "retries"),
]


@pytest.mark.parametrize(("source", "params", "key"), WRONG_TYPES)
def test_wrong_type_or_range_names_the_source_and_the_key(source, params, key):
    with pytest.raises(BenchlibError, match=rf"^source {source!r} params: {key}(\.\d+)?: "):
        get_dataset(source).resolve(params)


@pytest.mark.parametrize(
    ("source", "missing"),
    [("tabular_csv", "path, target"), ("femnist_leaf", "path"), ("pacs_local", "path")],
)
def test_required_keys_of_local_sources(source, missing):
    with pytest.raises(BenchlibError, match=rf"source {source!r} params: {missing} must be given"):
        get_dataset(source).resolve({})


def test_bring_your_own_path_stays_optional_so_a_config_without_the_data_parses():
    for name in dataset_names():
        source = get_dataset(name)
        if source.access_page:
            assert "path" in source.params and source.params["path"].default is UNSET, name
            assert not source.params["path"].required, name
            assert "path" not in source.resolve({}), name


def test_defaults_are_filled():
    assert get_dataset("hc18").resolve({"path": "x"}) == {"path": "x", "size": 64}
    assert get_dataset("hc18").resolve({})["path"] == "../shared/data/fetal_hc18_sample"
    kidney = get_dataset("kidney_stones").resolve({"path": "k"})
    assert kidney == {"path": "k", "view": "MIX", "patch_size": 256, "max_overlap": 20,
                      "min_coverage": 0.9, "whiten": True}  # fmt: skip
    fets = get_dataset("fets").resolve({"size": 32})
    assert fets["size"] == 32 and fets["labels"] == "subregions"
    assert fets["modalities"] == ["flair", "t1", "t1ce", "t2"] and fets["test"] == 0.2
    assert "institutions" not in fets and "path" not in fets
    pacs = get_dataset("officehome_local").resolve({"path": "p"})
    assert (pacs["expected_images"], pacs["expected_classes"], pacs["image_size"]) == (
        15588,
        65,
        224,
    )
    mnist = get_dataset("mnist").resolve({})
    assert mnist == {"retries": 2, "timeout": 60.0, "rgb32": True}  # overrides stay absent
    isic = get_dataset("isic2019_local").resolve({"path": "i", "side": 36})
    assert isic["num_images"] == isic["split_rows"] == 23_247 and "store_side" not in isic
    chex = get_dataset("chexmask_mimic").resolve({})
    assert (chex["min_rca"], chex["num_images"], chex["seed"], chex["size"]) == (0.7, 200, 0, 64)
    assert "download_dir" not in get_dataset("chexmask_mimic").params  # not a workflow download


def test_given_values_win_and_the_given_mapping_is_not_changed():
    given = {"path": "k", "view": "SUR"}
    assert get_dataset("kidney_stones").resolve(given)["view"] == "SUR"
    assert given == {"path": "k", "view": "SUR"}


@pytest.mark.parametrize("name", dataset_names())
def test_every_declared_default_fits_its_schema_and_every_param_is_described(name):
    source = get_dataset(name)
    jsonschema.Draft202012Validator.check_schema(source.params.schema())
    defaults = source.params.defaults()
    for key, param in source.params.items():
        if key in defaults:
            jsonschema.Draft202012Validator(dict(param.schema)).validate(defaults[key])
        assert param.description.strip(), f"{name}: params.{key} has no description"
        assert not (param.required and param.default is not UNSET), f"{name}: params.{key}"
    # the workflow resolves a config's params, then the prepare step resolves them again
    given = {k: "x" for k, p in source.params.items() if p.required}
    resolved = source.resolve(given)
    assert source.resolve(resolved) == resolved == {**defaults, **given}


def test_every_source_registered_with_the_workflow_files_declares_their_overrides():
    from benchlib.data.download import remote_files

    for name in dataset_names():
        declared = get_dataset(name).params
        for remote in remote_files(name):
            assert "download_dir" in declared and "retries" in declared, name
            assert remote.url_param in declared and remote.sha256_param in declared, name
            if remote.md5:
                assert remote.md5_param in declared, name
            if remote.size:
                assert remote.size_param in declared, name

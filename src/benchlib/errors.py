"""User-facing errors: one line that names the problem and the fix."""


class BenchlibError(Exception):
    """An error caused by bad input (config, data, files) rather than a bug.

    The CLI prints ``error: <message>`` on one line and exits non-zero, without a traceback.
    """


def require(condition: bool, message: str) -> None:
    """Raise :class:`BenchlibError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise BenchlibError(message)


# Optional packages -> the extra of pyproject.toml that installs them.
EXTRAS = {
    "monai": "medical",
    "nibabel": "medical",
    "imagecorruptions": "fedagain",
    "flwr": "bench",
    "snakemake": "workflow",
    "snakemake_executor_plugin_slurm": "workflow",
    "tensorboard": "tracking",
}


def missing_extra(exc: ModuleNotFoundError) -> BenchlibError | None:
    """The clear error for an optional package that is not installed (None for any other)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return BenchlibError(
        f"{top} is not installed; it comes with the {extra} extra: pip install 'benchlib[{extra}]'"
    )

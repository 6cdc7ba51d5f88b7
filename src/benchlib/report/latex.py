"""LaTeX output: the jinja2 environment of the table templates in ``benchlib/templates``."""

from __future__ import annotations

from importlib import resources

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def tex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))


def _environment():
    import jinja2

    env = jinja2.Environment(
        block_start_string=r"\BLOCK{",
        block_end_string="}",
        variable_start_string=r"\VAR{",
        variable_end_string="}",
        comment_start_string=r"\#{",
        comment_end_string="}",
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["tex"] = tex_escape
    return env


def render_template(template: str, **context) -> str:
    """Render a template shipped in benchlib/templates (``\\VAR{x}``, ``\\BLOCK{...}``)."""
    source = resources.files("benchlib").joinpath(f"templates/{template}").read_text()
    return _environment().from_string(source).render(**context)

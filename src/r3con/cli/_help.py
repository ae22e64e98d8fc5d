"""Help that names values in words (TEXT, PATH, NUMBER) instead of typer's Python type names (<str>, <bool>)."""

from __future__ import annotations

from typing import Any

import typer

_TYPE_WORDS = {"<int>": "INTEGER", "<float>": "NUMBER", "<str>": "TEXT", "<path>": "PATH", "<list[str]>": "TEXT",
               "<bool>": ""}


def plain_command(app: typer.Typer) -> Any:
    """The command of `app`, with help that names values in words instead of Python types."""
    root = typer.main.get_command(app)

    def plain(cmd: Any) -> None:
        for param in cmd.params:
            if param.param_type_name == "argument" or getattr(param, "is_flag", False) \
                    or not hasattr(param, "display_type"):
                label = ""
            else:
                shown = param.display_type(None)
                label = _TYPE_WORDS.get(str(shown), str(shown or "").strip("<>").upper())
            param.display_type_rich = lambda ctx, label=label: label or None
        help_option = cmd.get_help_option

        def plain_help_option(ctx: Any, get: Any = help_option) -> Any:
            option = get(ctx)
            if option is not None:
                option.display_type_rich = lambda ctx: None
            return option

        cmd.get_help_option = plain_help_option
        for sub in getattr(cmd, "commands", {}).values():
            plain(sub)

    plain(root)
    return root

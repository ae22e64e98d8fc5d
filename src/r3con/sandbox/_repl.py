"""The sandbox worker: reads JSON cells on stdin, runs them in one namespace, answers JSON on stdout."""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import traceback
from typing import Any


class _Final(BaseException):
    pass


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if hasattr(value, "tolist"):
            return _jsonable(value.tolist())
        return str(value)


def main() -> None:
    memory_mb, cpu_s = int(sys.argv[1]), int(sys.argv[2])
    import collections
    import math
    import re

    import numpy as np
    import pandas as pd

    with open(".init.json", encoding="utf-8") as fh:
        init = json.load(fh)
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    out = sys.stdout
    state: dict[str, Any] = {}

    def final_answer(value: Any) -> None:
        state["final"] = _jsonable(value)
        raise _Final

    namespace: dict[str, Any] = {"__name__": "__main__", "pd": pd, "np": np, "json": json, "re": re,
                                 "math": math, "collections": collections, "final_answer": final_answer}
    namespace.update(init["variables"])
    namespace["dfs"] = {name: pd.DataFrame(rows) for name, rows in init["dataframes"].items()}
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        code = json.loads(line)["code"]
        stdout, stderr = io.StringIO(), io.StringIO()
        state.clear()
        error = None
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                exec(compile(code, "<cell>", "exec"), namespace)
            except _Final:
                pass
            except BaseException as exc:  # the model's mistakes become observations
                frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
                error = "".join(frames[-3:])
        reply = {"stdout": stdout.getvalue()[-200_000:], "stderr": stderr.getvalue()[-200_000:], "error": error,
                 "has_final": "final" in state, "final": state.get("final")}
        out.write(json.dumps(reply, default=str) + "\n")
        out.flush()


if __name__ == "__main__":
    main()

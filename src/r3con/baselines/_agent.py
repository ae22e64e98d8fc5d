"""The coding-agent loop of R3CON's answer stage, set up for the baselines that work in the sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..sandbox import Sandbox, SandboxLimits
from ..stages.answer import AnswerOptions
from ._common import MethodRun


def agent_options(mr: MethodRun, max_steps: int, max_tokens: int) -> AnswerOptions:
    """Answer options from the run's settings (sandbox limits, mode, temperature) and the method's bounds."""
    s = mr.settings
    return AnswerOptions(
        mode="code", max_steps=max_steps, max_tokens=max_tokens, temperature=s.temperature,
        sandbox_limits=SandboxLimits(timeout_s=s.sandbox_timeout_s, memory_mb=s.sandbox_memory_mb),
        sandbox_mode=s.sandbox_mode, scratch_root=mr.dir.scratch_root,
    )


def sandbox_for(options: AnswerOptions, variables: Mapping[str, Any], host_functions: Mapping[str, Any] | None = None) -> Sandbox:
    return Sandbox(variables=variables, limits=options.sandbox_limits, mode=options.sandbox_mode,
                   scratch_root=options.scratch_root, host_functions=host_functions or {})

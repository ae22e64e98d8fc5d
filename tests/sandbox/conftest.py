"""Fixtures of the sandbox tests: short limits, so that timeouts and restarts stay cheap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from r3con.sandbox import Sandbox, SandboxLimits


@pytest.fixture(scope="session")
def fast_limits() -> SandboxLimits:
    return SandboxLimits(timeout_s=2.0, memory_mb=1024, cpu_s=60, output_chars=2_000)


@pytest.fixture(scope="session")
def require() -> Callable[..., None]:
    """require(sandbox, *layers): skip when the kernel here refused a layer the test's claim rests on."""

    def check(sandbox: Sandbox, *layers: str) -> None:
        off = {name: sandbox.isolation.layers[name] for name in layers if sandbox.isolation.layers[name] != "on"}
        if off:
            pytest.skip(f"isolation layers unavailable here: {off}")

    return check


@pytest.fixture(scope="session")
def answers() -> Callable[[Sandbox], Awaitable[None]]:
    """await answers(sandbox): the sandbox still runs cells (after an attack)."""

    async def check(sandbox: Sandbox) -> None:
        result = await sandbox.run("print(1 + 1)")
        assert (result.stdout, result.error) == ("2\n", None), result

    return check

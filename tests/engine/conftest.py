import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[str]:
    """One local Ray cluster (two CPUs, so two workers) for these tests, stopped after the last of them (not
    kept through the rest of the suite); its address, for a CLI to join."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'r3con[ray]' runs the Ray engine's tests")
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init sets its own; the tests after these expect pytest's
    # "local": a cluster of its own, never one `ray start` left running on the machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, sigterm)

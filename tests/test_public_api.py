import r3con


def test_public_api_is_small_sorted_and_pinned():
    assert r3con.__all__ == sorted(r3con.__all__)
    assert set(r3con.__all__) == {
        "BudgetExceeded", "ChatRequest", "Completion", "ConfigError", "ContextTooLong", "Corpus", "DiskFull", "Document",
        "EndpointUnreachable", "Evidence", "Failure", "InputError", "Inputs", "LLM", "Message", "OutputError",
        "Plan", "ProviderError", "R3conError", "Run", "RunCancelled", "RunEnd", "RunFailed", "RunResult",
        "SandboxError", "Settings", "Usage", "__version__", "ask", "documents_from_texts", "events", "load_corpus",
        "load_documents", "resume", "run", "split_documents", "start",
    }
    for name in r3con.__all__:
        assert hasattr(r3con, name), name


def test_dir_lists_the_public_names_before_they_are_imported():
    import subprocess
    import sys

    shown = subprocess.run([sys.executable, "-c", "import r3con; print(' '.join(dir(r3con)))"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert {"run", "start", "ask", "resume", "Run", "RunResult", "LLM", "Usage", "Plan"} <= set(shown)


def test_every_error_is_an_r3con_error_with_an_exit_code():
    for name in ("ConfigError", "EndpointUnreachable", "InputError", "OutputError", "ProviderError",
                 "BudgetExceeded", "SandboxError", "RunFailed", "DiskFull", "ContextTooLong"):
        cls = getattr(r3con, name)
        assert issubclass(cls, r3con.R3conError)
        assert cls.exit_code in (1, 2)
    assert r3con.ConfigError.exit_code == 2 and r3con.InputError.exit_code == 2 and r3con.RunFailed.exit_code == 1

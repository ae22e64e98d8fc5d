"""Debian's chromium driven by Selenium, headless; nothing downloads a browser or a driver of its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser")
DRIVERS = ("chromedriver",)


def _find(env: str, names: tuple[str, ...], fallback: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if Path(given).is_file() else None
    found = next((shutil.which(n) for n in names if shutil.which(n)), None)
    return found or (fallback if Path(fallback).is_file() else None)


def browser_paths() -> tuple[str | None, str | None]:
    """The chromium binary and its chromedriver (env R3CON_CHROMIUM, R3CON_CHROMEDRIVER; else on PATH)."""
    return (_find("R3CON_CHROMIUM", BROWSERS, "/usr/bin/chromium"),
            _find("R3CON_CHROMEDRIVER", DRIVERS, "/usr/bin/chromedriver"))


def missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    browser, driver = browser_paths()
    if browser is None or driver is None:
        return "Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; .ci/run does)"
    return None


def start_chromium(width: int = 1400, height: int = 1000):
    """A headless chromium WebDriver at the given window size, logging the browser console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a browser or a driver
    browser, driver = browser_paths()
    if browser is None or driver is None:
        raise RuntimeError(missing_reason() or "chromium not found")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))
